"""A grouped (not depthwise) 1-D convolution as in the decoders (4 channels a group, kernel 2)
against the same as 2-D of height 1: microseconds per call at N streams, one thread; columns
N, C, groups, K, 1-D us, 2-D us, max |difference|. """
import numpy as np, onnxruntime as ort, time
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from streamdec.models.graph import depthwise_conv1d_as_2d
rng=np.random.default_rng(0)


def to_2d(m):
    """The grouped convolution as 2-D of height 1, as streamdec.models.graph does for the
    depthwise ones (it leaves grouped ones alone because of this measurement)."""
    w = m.graph.initializer[0]
    dims = list(w.dims)
    del w.dims[:]
    w.dims.extend(dims[:2] + [1, dims[2]])
    conv = m.graph.node[0]
    group = [a for a in conv.attribute if a.name == "group"][0].i
    m.graph.initializer.append(nh.from_array(np.array([2], np.int64), "ax"))
    del m.graph.node[:]
    m.graph.node.extend([h.make_node("Unsqueeze", ["x", "ax"], ["x4"]),
                         h.make_node("Conv", ["x4", "w"], ["y4"], group=group),
                         h.make_node("Squeeze", ["y4", "ax"], ["y"])])


for N,C,G,K in [(1,512,128,2),(16,512,128,2),(64,512,128,2),(16,512,512,2)]:
    w=rng.standard_normal((C,C//G,K)).astype(np.float32)
    g=h.make_graph([h.make_node("Conv",["x","w"],["y"],group=G)],"g",[h.make_tensor_value_info("x",TP.FLOAT,[N,C,K])],[h.make_tensor_value_info("y",TP.FLOAT,None)],[nh.from_array(w,"w")])
    m=h.make_model(g,opset_imports=[h.make_opsetid("",13)])
    x=rng.standard_normal((N,C,K)).astype(np.float32)
    res=[]
    for rw in (False,True):
        mm=type(m)(); mm.CopyFrom(m)
        if rw: to_2d(mm)
        o=ort.SessionOptions(); o.intra_op_num_threads=1
        s=ort.InferenceSession(mm.SerializeToString(),o,providers=["CPUExecutionProvider"])
        y=s.run(None,{"x":x})[0]
        t=time.process_time()
        for _ in range(500): s.run(None,{"x":x})
        res.append(((time.process_time()-t)/500*1e6,y))
    print(N,C,G,K, round(res[0][0],1), round(res[1][0],1), float(np.abs(res[0][1]-res[1][1]).max()))

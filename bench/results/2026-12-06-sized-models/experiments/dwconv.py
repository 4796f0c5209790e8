"""A depthwise 1-D convolution (the zipformers' conv modules, at their shapes, 16 streams)
against the same as 2-D of height 1 (what streamdec.models.graph makes of it) and as an
unfold (Gather, Mul, ReduceSum): microseconds per call, one thread, and the max |difference|
from the 1-D output."""
import time, numpy as np, onnx, onnxruntime as ort
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
rng=np.random.default_rng(0)
def sess(model):
    o=ort.SessionOptions(); o.intra_op_num_threads=1; o.inter_op_num_threads=1
    o.graph_optimization_level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), o, providers=["CPUExecutionProvider"])
def conv1d(N,C,T,K,P):
    w=rng.standard_normal((C,1,K)).astype(np.float32); b=rng.standard_normal(C).astype(np.float32)
    g=h.make_graph([h.make_node("Conv",["x","w","b"],["y"],group=C,pads=[P,P])],"g",
        [h.make_tensor_value_info("x",TP.FLOAT,[N,C,T])],[h.make_tensor_value_info("y",TP.FLOAT,None)],
        [nh.from_array(w,"w"),nh.from_array(b,"b")])
    return h.make_model(g,opset_imports=[h.make_opsetid("",17)]),w,b
def conv2d(N,C,T,K,w,b,P):
    g=h.make_graph([h.make_node("Unsqueeze",["x","ax"],["x4"]),
                    h.make_node("Conv",["x4","w","b"],["y4"],group=C,pads=[0,P,0,P]),
                    h.make_node("Squeeze",["y4","ax"],["y"])],"g",
        [h.make_tensor_value_info("x",TP.FLOAT,[N,C,T])],[h.make_tensor_value_info("y",TP.FLOAT,None)],
        [nh.from_array(w.reshape(C,1,1,K),"w"),nh.from_array(b,"b"),nh.from_array(np.array([2],np.int64),"ax")])
    return h.make_model(g,opset_imports=[h.make_opsetid("",17)])
def unfold(N,C,T,K,w,b,P):
    To=T+2*P-K+1
    idx=(np.arange(To)[:,None]+np.arange(K)[None,:]).astype(np.int64)
    g=h.make_graph([h.make_node("Pad",["x","pads"],["xp"]),h.make_node("Gather",["xp","idx"],["u"],axis=2),   # N,C,To,K
                    h.make_node("Mul",["u","w"],["m"]),
                    h.make_node("ReduceSum",["m","ax"],["s"],keepdims=0),
                    h.make_node("Add",["s","b"],["y"])],"g",
        [h.make_tensor_value_info("x",TP.FLOAT,[N,C,T])],[h.make_tensor_value_info("y",TP.FLOAT,None)],
        [nh.from_array(idx,"idx"),nh.from_array(w.reshape(C,1,K),"w"),nh.from_array(b.reshape(C,1),"b"),nh.from_array(np.array([-1],np.int64),"ax"),nh.from_array(np.array([0,0,P,0,0,P],np.int64),"pads")])
    return h.make_model(g,opset_imports=[h.make_opsetid("",17)])
def timeit(s,x,n=300):
    s.run(None,{"x":x})
    t=time.process_time()
    for _ in range(n): y=s.run(None,{"x":x})[0]
    return (time.process_time()-t)/n*1e6, y
for N,C,T,K,P in [(16,512,2,15,7),(16,512,2+7,8,0),(16,192,16,31,15),(16,192,16+15,16,0),(16,384,4,15,7),(16,256,8+15,16,0)]:
    m,w,b=conv1d(N,C,T,K,P)
    x=rng.standard_normal((N,C,T)).astype(np.float32)
    res={}
    for name,mod in [("conv1d",m),("conv2d",conv2d(N,C,T,K,w,b,P)),("unfold",unfold(N,C,T,K,w,b,P))]:
        us,y=timeit(sess(mod),x); res[name]=(us,y)
    ref=res["conv1d"][1]
    print((N,C,T,K), {k:(round(v[0],1), float(np.abs(v[1]-ref).max()) if v[1].shape==ref.shape else v[1].shape) for k,v in res.items()})

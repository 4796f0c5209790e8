"""``python tests/signal_at.py SPOT ARGS...``: ``python -m streamdec ARGS...`` that sends
itself SIGTERM at one spot of its main thread, found by a trace function, so that a test
meets a race at the same instant on every run. The signal is handled at once, inside the
code that was running there. SPOT:

- ``reaped``: multiprocessing has just reaped a dead child (``os.waitpid`` returned its pid
  in ``Popen.poll``) and not yet noted its exit code;
- ``launch:N``: the N-th process start (``Popen._launch``) has just forked the child, which
  its ``Process`` object does not know yet.
"""

from __future__ import annotations

import os
import signal
import sys


def tracer_for(spot: str):
    launches = [0]
    fired = [False]

    def fire() -> None:
        fired[0] = True
        os.kill(os.getpid(), signal.SIGTERM)

    def trace(frame, event, arg):
        if fired[0]:
            return None
        code = frame.f_code
        where = os.path.basename(code.co_filename)
        if spot == "reaped" and event == "line" and where == "popen_fork.py" \
                and code.co_name == "poll" and frame.f_locals.get("pid"):
            fire()
        elif spot.startswith("launch:") and event == "return" \
                and code.co_name == "spawnv_passfds" and frame.f_back is not None \
                and frame.f_back.f_code.co_name == "_launch":
            launches[0] += 1
            if launches[0] == int(spot.partition(":")[2]):
                fire()
        return trace

    return trace


if __name__ == "__main__":
    from streamdec.cli.main import main

    sys.settrace(tracer_for(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))

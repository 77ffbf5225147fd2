"""ONNX Runtime timed the way the A/B benches time Kiln's packages: one session per model with
intra_op_num_threads as Kiln's --threads (all graph optimisations on, CPU provider, warmed up), and
the median of `repeat` runs, one call per round so that rounds can alternate with Kiln's."""
import time

import numpy as np


class OrtTimer:
    def __init__(self, model, inputs, threads):
        """inputs: {name: path of a .npy file}."""
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self.feeds = {name: np.load(path) for name, path in inputs.items()}
        for _ in range(3):
            self.session.run(None, self.feeds)

    def median_ms(self, repeat):
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            self.session.run(None, self.feeds)
            times.append((time.perf_counter() - start) * 1e3)
        return sorted(times)[len(times) // 2]

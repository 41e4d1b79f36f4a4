"""Run by the serving image's TensorFlow (.venv-serving: TF 2.20, as TensorFlow Serving 2.20.0):
loads a SavedModel as TensorFlow Serving does (the TF1 SavedModel loader in a session, tag
`serve`: importing the graph fails on any op this TensorFlow does not register) and answers one
encoded image through its `serving_bytes` signature.

    python serving_probe.py MODEL_VERSION_DIR IMAGE OUT.npz   prints {"tensorflow", "signatures", "producer"}
"""

import json
import sys

import numpy as np
import tensorflow as tf


def main(model_dir: str, image_file: str, out: str) -> None:
    with open(image_file, "rb") as f:
        encoded = f.read()
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], model_dir)
        signature = meta_graph.signature_def["serving_bytes"]
        feeds = {tensor.name: [encoded] for tensor in signature.inputs.values()}
        outputs = session.run({key: tensor.name for key, tensor in signature.outputs.items()}, feeds)
    np.savez(out, **outputs)
    print(json.dumps({"tensorflow": tf.__version__, "signatures": sorted(meta_graph.signature_def),
                      "producer": meta_graph.graph_def.versions.producer}))


if __name__ == "__main__":
    main(*sys.argv[1:4])

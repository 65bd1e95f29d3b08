"""trainer-run: a config-driven training runner for models on NumPy or CuPy arrays.

The library is usable from Python without Hydra; the ``trainer-run`` command builds the
same objects from a config. See the README for the map from Chainer, MXNet and nnabla
names to ours.
"""

__version__ = "0.1.0"

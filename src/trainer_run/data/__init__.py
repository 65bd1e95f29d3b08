"""The user's data and the run's: the dataset protocol and records (``datasets``), synthetic
sets (``synthetic``), the rules from a loader's arrays to a run's data (``prepare``), the
inputs' scaling (``input_scaling``: ``dataset.normalize``), iterators and background prefetch,
memory-mapped arrays (``mapped``), and the loaders of array files, CSV tables, IDX files and
the standard image sets (``array_files``, ``csv_files``, ``image_sets`` with ``idx``, ``cifar``
and ``download``)."""

from .datasets import ArrayDataset, Data, Splits, SubDataset, Use, split_random, stratified_positions
from .iterators import SerialIterator
from .mapped import MappedArray, open_npy
from .prefetch import Prefetcher
from .prepare import declared_classes, prepare
from .synthetic import blobs, mnist_like, regression, spirals

__all__ = ["ArrayDataset", "Data", "MappedArray", "Prefetcher", "SerialIterator",
           "Splits", "SubDataset", "Use", "open_npy",
           "blobs", "declared_classes", "mnist_like", "prepare", "regression",
           "spirals", "split_random", "stratified_positions"]

"""The user's data and the run's: the dataset protocol and records (``datasets``), synthetic
sets (``synthetic``), the rules from a loader's arrays to a run's data (``prepare``),
normalization, iterators, and the loaders of array files, CSV tables and the standard image
sets."""

from .datasets import ArrayDataset, Data, Splits, SubDataset, split_random, stratified_positions
from .iterators import SerialIterator
from .prepare import declared_classes, prepare
from .synthetic import GENERATORS, blobs, make_synthetic, mnist_like, regression, spirals

__all__ = ["ArrayDataset", "Data", "GENERATORS", "SerialIterator", "Splits", "SubDataset",
           "blobs", "declared_classes", "make_synthetic", "mnist_like", "prepare", "regression",
           "spirals", "split_random", "stratified_positions"]

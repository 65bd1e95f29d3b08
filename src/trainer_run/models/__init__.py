"""Models: containers of named parameters that map a batch to a loss.

The model protocol (what the training loop needs from any model, ours or yours):

- ``params()`` returns an ordered mapping from parameter path (``"l1/W"``) to
  :class:`~trainer_run.params.Parameter`. The order fixes each parameter's index.
- ``model(*batch)`` runs forward on one converted batch and returns either the loss (a
  scalar :class:`~trainer_run.autograd.Variable`) or a dict with key ``"loss"`` and any
  further scalar metrics (e.g. ``"accuracy"``), which are reported as ``train/<name>``
  and ``val/<name>``.
- A model must read its parameters through ``param.data`` on every call: the trainer
  packs parameters into flat buffers and rebinds ``data`` to views.
- **Mode.** The updater calls the model in training mode, evaluation (validation, test) and
  prediction in evaluation mode (:func:`~trainer_run.module.set_mode`): a :class:`Module` reads its mode from
  ``self.training`` (True while training; dropout and batch statistics act only then) and
  changes it with ``train()`` / ``eval()``, like PyTorch's; any other model that has a
  ``training`` attribute gets it set, and one without is called as it is.

:class:`~trainer_run.module.Module` gives the first for free: assign Parameters and sub-Modules as attributes
and ``params()`` walks them in assignment order.

The built-in architectures are ordinary models of this kind: ``mlp`` (MLP, logistic
regression), ``cnn``, ``resnet``, and the language models ``gpt`` (:class:`GPT`) and
``lstm_lm`` (:class:`LSTMLanguageModel`); :mod:`.base` holds their task heads. :mod:`.building`
builds a model from its config section (the run's and ``load_model``'s one way).
"""

from ..layers import Linear
from ..module import Module, evaluating, persistents_of, set_mode, summary
from .base import TASKS, Model, flat
from .building import build_model
from .cnn import CNN
from .gpt import GPT
from .lstm_lm import LSTMLanguageModel
from .mlp import MLP, LogisticRegression
from .resnet import ResNet

__all__ = ["CNN", "GPT", "LSTMLanguageModel", "MLP", "TASKS", "Linear", "LogisticRegression", "Model",
           "Module", "ResNet",
           "build_model", "evaluating", "flat", "persistents_of", "set_mode", "summary"]

"""Learning-rate schedulers against MXNet 1.9.1's formulas, written out by hand."""

from __future__ import annotations

import pytest

from trainer_run.errors import ConfigError
from trainer_run.schedulers import ConstantScheduler, CosineScheduler

# -- hand references -----------------------------------------------------------------------



# -- ConstantScheduler -------------------------------------------------------------------------



# -- CosineScheduler ---------------------------------------------------------------------------



# -- state ------------------------------------------------------------------------------------



# -- arguments ----------------------------------------------------------------------------------

@pytest.mark.parametrize("klass, kwargs", [
    (ConstantScheduler, dict(base_lr=0.1, warmup_begin_lr=0.2)),
    (ConstantScheduler, dict(base_lr=0.1, warmup_mode="exponential")),
    (ConstantScheduler, dict(base_lr=0.1, warmup_steps=-1)),
    (ConstantScheduler, dict(base_lr=-0.1)),
    (CosineScheduler, dict(max_update=10, base_lr=0.1, warmup_begin_lr=0.2)),
    (CosineScheduler, dict(max_update=10, warmup_mode="cubic")),
    (CosineScheduler, dict(max_update=0)),
    (CosineScheduler, dict(max_update=-5)),
    (CosineScheduler, dict(max_update=2.5)),
    (CosineScheduler, dict(max_update=5, warmup_steps=5)),
])
def test_invalid_arguments_raise_config_error(klass, kwargs):
    with pytest.raises(ConfigError):
        klass(**kwargs)

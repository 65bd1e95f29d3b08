"""trainer_run.storage.yaml_files.read gives what OmegaConf.load gives, for our files and for its
scalar rules."""

import pytest
import yaml
from omegaconf import OmegaConf

from trainer_run.compose.options import CONFIGS
from trainer_run.storage.yaml_files import read

SCALARS = "a: 1e-8\nb: 2020-01-01\nc: 1_000.5\nd: .inf\ne: 0x10\nf: yes\ng: ${x.y}\nh: null\ni: '3'\n"


@pytest.mark.parametrize("path", sorted(CONFIGS.rglob("*.yaml")), ids=lambda p: str(p.relative_to(CONFIGS)))
def test_every_config_file_reads_as_omegaconf_reads_it(path):
    assert read(path) == OmegaConf.to_container(OmegaConf.load(path), resolve=False)


def test_scalars_follow_omegaconf_rules(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SCALARS)
    got = read(path)
    assert got == OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    assert got["a"] == 1e-8 and got["b"] == "2020-01-01" and got["c"] == 1000.5


def test_a_duplicate_key_is_refused(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text("a: 1\na: 2\n")
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key a"):
        read(path)
    with pytest.raises(yaml.constructor.ConstructorError):
        OmegaConf.load(path)


def test_an_empty_file_is_an_empty_mapping_as_in_omegaconf(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("# only a comment\n")
    assert read(path) == {} == OmegaConf.to_container(OmegaConf.load(path))

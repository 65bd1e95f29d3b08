"""Storage: how trainer-run writes and reads everything it keeps on disk.

What a run keeps is plain data: arrays in ``.npz`` archives of ``.npy`` members plus JSON,
never pickle, so reading a file back never runs code. Every file is written whole (atomically,
checksummed where it is a checkpoint's) or not at all, and read only after it is checked.
Config files are YAML, read as data the way OmegaConf reads them.

- ``checkpoint``: a training state as ``state.json`` plus ``arrays.npz``, saved, found and loaded
- ``checkpoint_schema``: the schema and format version of ``state.json``; the checkpoint errors
- ``checksums``: CRC-32 and size of a file, computed while it is written
- ``npz``: ``.npz`` archives written in one pass, read without pickle
- ``ziparchive``: a zip of uncompressed members, written in one sequential pass
- ``states``: state trees flattened into JSON-able data plus a dict of arrays, and back
- ``files``: atomic writes and whole appends, never through a link in a run; a refused write names the file
- ``reading``: a run's files read as regular files of a bounded size, never through a link
- ``strict_json``: JSON with ``null`` for NaN and infinities, for files other programs read
- ``background_write``: one write at a time on a background thread, of a frozen copy of a state
- ``yaml_files``: YAML files read as OmegaConf reads them, parsed by libyaml
"""

"""Config validation before any work starts (being written)."""


def check_overrides(argv: list[str]) -> None:
    return None


def check_types(config: dict) -> None:
    return None

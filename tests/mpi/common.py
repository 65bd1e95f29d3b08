"""What the MPI scripts share."""


def error_of(call) -> str:
    """``"Type: message"`` of the exception ``call()`` raises, "" when it raises none."""
    try:
        call()
    except Exception as e:  # the test checks the type and the message
        return f"{type(e).__name__}: {e}"
    return ""

"""The error of the capture layer."""


class AttentionUnavailable(RuntimeError):
    """The model cannot expose post-softmax attention (no adapter, or the capture came back empty)."""

"""The workflow's report: the predictions, their breakdown and the
representatives on one HTML page (``python -m report``)."""
from .page import build

__all__ = ["build"]

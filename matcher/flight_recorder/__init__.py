"""Flight Recorder: loading PyTorch Flight Recorder dumps safely and comparing them across ranks."""

from matcher.flight_recorder.analyze import analyze_dumps
from matcher.flight_recorder.load import DumpFormatError, FRDump, UnsafeDumpError, load_dump

__all__ = ["DumpFormatError", "FRDump", "UnsafeDumpError", "analyze_dumps", "load_dump"]

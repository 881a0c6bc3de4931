"""``magw top``: a live view of a lab's nodes, per node and per path (docs/show.md). ``frame`` builds one frame
from two readings of ``magw.ops.show`` inputs (pure); ``screen`` draws frames with curses until ``q``."""

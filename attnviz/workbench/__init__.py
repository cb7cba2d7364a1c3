"""Everything the app computes or caches, with no Streamlit in it:

- `memory`: the memory budget, byte-bounded stores, handing freed heap back;
- `slots`: the heavy-work slots; `jobs`: heavy actions in threads of their own, cancellable from the page;
- `shared.Workbench`: the state every request goes through (stores, reservations, slots, jobs);
- `shelf`: models under the budget;
- one module per family of cached results: `traces` (traces, exports, figures), `attention_lenses` (lens
  weights, queries and keys), `views` (the views drawn: raw weights or a lens's, the one place that decides), `heads`
  (ablation, scan, detectors), `minimal_pairs`, `head_finder`, `learn`, `translate`, `parity`. Each result function
  takes the Workbench first and is keyed by plain values (model source, texts, options).
"""

from attnviz.workbench.jobs import Cancelled, TooLong
from attnviz.workbench.shared import OverBudget, Workbench
from attnviz.workbench.slots import Busy

__all__ = ["Busy", "Cancelled", "OverBudget", "TooLong", "Workbench"]

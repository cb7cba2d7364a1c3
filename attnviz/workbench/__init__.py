"""Everything the app computes or caches, with no Streamlit in it: the memory budget and byte-bounded stores
(`memory`), the heavy-work slots (`slots`), the shared state every request goes through (`shared.Workbench`),
models under the budget (`shelf`), and one function per cached result: `traces` (traces, views, figures),
`lenses`, `heads` (ablation, scan, detectors), `pairs`, `finder`, `learn`, `translate`, `parity`. Each
result function takes the Workbench first and is keyed by plain values (model source, texts, options)."""

from attnviz.workbench.shared import OverBudget, Workbench
from attnviz.workbench.slots import Busy

__all__ = ["Busy", "OverBudget", "Workbench"]

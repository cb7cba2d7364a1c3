"""A page that draws the circuit view alone (attnviz/ui/circuit_view.py, `circuit_section`) with the language switch,
for AppTest while the view has no place on the Explore page yet: the model is the one a test hands to `use` (its
session fixture's), shared with the script AppTest runs in the same process."""

from __future__ import annotations

_CHOSEN: dict = {}


def use(model, name: str) -> None:
    _CHOSEN.update(model=model, name=name)


def page() -> None:
    from attnviz.ui.circuit_view import circuit_section
    from attnviz.ui.language import language_switch

    language_switch()
    circuit_section(_CHOSEN["model"], _CHOSEN["name"])

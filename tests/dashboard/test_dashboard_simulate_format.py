"""The What-if page reads right: untouched, every change is `±0` with no colour and
no arrow; the deadline is "as recorded" with no slider showing a value; tools without a
recorded cap are offered a cap instead of a slider; the rate axis has round ticks and the
tooltips say the counts."""

from __future__ import annotations

from streamlit.proto.Metric_pb2 import Metric

from tests.support.apptest import chart, open_simulate


def test_a_moved_slider_colours_its_change(db: str) -> None:
    at = open_simulate()
    at.toggle(key="sim_deadline_on").set_value(True).run()
    at.slider(key="sim_deadline_s").set_value(5.0).run()
    exhaustion = next(m for m in at.metric if m.label == "Exhaustion rate")
    assert exhaustion.delta.startswith("+") and exhaustion.delta.endswith(" pp")
    assert Metric.MetricColor.Name(exhaustion.proto.color) == "RED"


def test_untouched_policy_shows_no_change_uncoloured(db: str) -> None:
    at = open_simulate()
    assert at.metric
    for m in at.metric:
        assert m.delta == "±0", (m.label, m.delta)
        assert Metric.MetricColor.Name(m.proto.color) == "GRAY", m.label
        assert Metric.MetricDirection.Name(m.proto.direction) == "NONE", m.label
    assert not [w for w in at.slider if w.key == "sim_deadline_s"]
    assert any("Run deadline: as recorded" in c.value.replace("\\", "") for c in at.caption)
    # a slider for each model, tool, queue, subagent or reconcile key with a recorded cap,
    # grouped by kind; a key recorded without one is offered in its kind's list, no slider
    cap_sliders = {w.key.split(":", 1)[1] for w in at.slider if w.key.startswith("sim_cap:")}
    assert {"model:gpt-4o-mini", "model:gpt-4o", "tool:fetch_report"} <= cap_sliders
    offered = {option for w in at.multiselect if w.key.startswith("sim_add:")
               for option in w.options}
    assert "queue:handoff_queue" in offered and not cap_sliders & offered
    assert [e.label for e in at.expander if e.label.startswith("Caps per")][:3] == [
        "Caps per model (s)", "Caps per tool (s)", "Caps per queue (s)"]
    # the labels, and so the sliders' accessible names, are the keys as they are
    assert all(w.label == w.key.split(":", 1)[1] for w in at.slider
               if w.key.startswith("sim_cap:"))

    spec = chart(at, "Client timeout rate per step: actual vs predicted")
    axis = spec["layout"]["xaxis"]
    assert axis["dtick"] in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
    assert axis["tickformat"] == (".1%" if axis["dtick"] < 0.01 else ".0%")
    for bars in spec["data"]:
        assert "calls" in bars["hovertemplate"] and "step key" in bars["hovertemplate"]

"""inspect: the graph of a task, traced with fx or, failing that, as ATen operators."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"


def test_fx_graph_of_linear_relu(harness):
    code, g, err = harness("inspect", "--task", str(ROOT / "examples/tasks/linear_bias_relu.py"))
    assert code == 0, err
    assert g["graph"]["source"] == "fx"
    mods = [n for n in g["graph"]["nodes"] if n["op"] == "call_module"]
    linear = next(n for n in mods if n["module_type"] == "Linear")
    assert linear["attrs"]["in_features"] == g["inputs"][0]["shape"][-1]
    assert linear["parameters"]["weight"] == [linear["attrs"]["out_features"], linear["attrs"]["in_features"]]
    out = g["graph"]["nodes"][-1]
    assert out["op"] == "output"
    assert g["outputs"]["shape"] == [g["inputs"][0]["shape"][0], linear["attrs"]["out_features"]]
    assert {p["name"] for p in g["parameters"]} >= {"linear.weight", "linear.bias"} or len(
        g["parameters"]
    ) == 2


def test_aten_fallback_for_untraceable(harness):
    code, g, err = harness("inspect", "--task", str(CASES / "task_branchy.py"))
    assert code == 0, err
    assert g["graph"]["source"] == "aten" and "fx_error" in g
    ops = [n["op"] for n in g["graph"]["nodes"]]
    assert any("addmm" in op or "linear" in op or "mm" in op for op in ops)


def test_inspect_bad_task(harness):
    code, g, _ = harness("inspect", "--task", str(CASES / "task_syntax.py"))
    assert code == 1 and "does not parse" in g["error"]


def test_sizes_used_as_numbers_trace_with_fixed_sizes(harness):
    """minGPT slices its mask buffer by x.size(): symbolic tracing fails on a proxy in a slice,
    and the module is traced again with this run's sizes, the buffer kept as a node and -inf
    written in a form JSON can hold."""
    task = ROOT / "bench" / "tasks_extra" / "causal_attention.py"  # at the cpu sizes: T = 48
    code, g, err = harness("inspect", "--task", str(task), "--backend", "cpu")
    assert code == 0, err
    assert g["graph"]["source"] == "fx" and g["graph"]["sizes"] == "fixed", g.get("fx_error")
    nodes = {n["name"]: n for n in g["graph"]["nodes"]}
    assert nodes["bias"]["op"] == "get_attr"
    sliced = next(
        n for n in nodes.values() if n["target"].endswith("getitem") and n["args"][0] == {"node": "bias"}
    )
    assert sliced["args"][1][2:] == ["slice(None, 48, None)", "slice(None, 48, None)"]
    fill = next(n for n in nodes.values() if n["target"] == "masked_fill")
    assert fill["args"][2] == {"float": "-inf"}
    views = [n["args"][1:] for n in nodes.values() if n["target"] == "view"]
    assert [2, 48, 4, 16] in views  # B, T, n_head, C // n_head as this run's numbers
    code, g, err = harness("inspect", "--task", str(ROOT / "examples/tasks/linear_bias_relu.py"))
    assert code == 0 and g["graph"]["sizes"] == "symbolic", err


def test_forward_that_assigns_to_its_module(harness):
    """Tracing runs forward() with proxies: its `self.h0 = self.h0.to(x.device)` must not leave
    a proxy in the module that the shapes are then propagated through (it did: the LSTM got
    a proxy for its state and inspect failed with an internal error)."""
    code, g, err = harness("inspect", "--task", str(CASES / "task_assigns_state.py"))
    assert code == 0, err
    assert g["graph"]["source"] == "fx", g.get("fx_error")
    nodes = {n["name"]: n for n in g["graph"]["nodes"]}
    assert nodes["lstm"]["module_type"] == "LSTM"
    assert nodes["lstm"]["args"][1] == [{"node": "to"}, {"node": "to_1"}]
    assert nodes["to"]["output"] == {"shape": [2, 4, 12], "dtype": "float32"}
    assert g["outputs"]["shape"] == [4, 3]


def test_tensors_made_at_init_are_replayable(harness):
    """The tensors __init__ makes without owning them are listed with how to make them again
    (the judge seeds both modules alike): drawn or constant before the parameters, in order; the
    list stops at one drawn after them. The trace reads the module as __init__ left it: forward()
    makes c0 the same tensor as h0, and the LSTM's state is h0 twice, not c0."""
    code, g, err = harness("inspect", "--task", str(CASES / "task_init_draws.py"))
    assert code == 0, err
    assert g["init_draws"] == [
        {"name": "h0", "fn": "randn", "shape": [2, 4, 12]},
        {"name": "mask", "fn": "zeros", "shape": [4, 12]},
        {"name": "scale", "fn": "rand", "shape": [12]},
        {"name": "c0", "fn": "randn", "shape": [2, 4, 12]},
    ]
    attrs = [n["target"] for n in g["graph"]["nodes"] if n["op"] == "get_attr"]
    assert "h0" in attrs and "c0" not in attrs, attrs
    code, g, err = harness("inspect", "--task", str(ROOT / "examples/tasks/linear_bias_relu.py"))
    assert code == 0 and g["init_draws"] == [], err


def test_transformer_encoders_are_traced_as_their_layers(harness):
    """An nn.TransformerEncoder in training mode is traced as its layers' computation over their
    submodules (self-attention without weights, residual additions, norms, feed-forward), each
    submodule one call; one in eval mode with a key padding mask stays one call."""
    code, g, err = harness("inspect", "--task", str(CASES / "task_encoder.py"))
    assert code == 0, err
    nodes = g["graph"]["nodes"]
    calls = [n["target"] for n in nodes if n["op"] == "call_module"]
    assert [c for c in calls if c.startswith("enc.")] == [
        f"enc.layers.{i}.{m}"
        for i in range(2)
        for m in ("self_attn", "dropout1", "norm1", "linear1", "dropout", "linear2", "dropout2", "norm2")
    ]
    attn = next(n for n in nodes if n["target"] == "enc.layers.0.self_attn")
    assert attn["kwargs"]["need_weights"] is False and attn["kwargs"]["is_causal"] is False
    assert "fast" in calls and not any(c.startswith("fast.") for c in calls)
    types = {n["target"]: n.get("module_type") for n in nodes if n["op"] == "call_module"}
    assert types["fast"] == "TransformerEncoder"


def test_assignments_to_the_module_are_listed(harness):
    """What forward() assigns to its module is listed, with whether the value depends on the
    inputs: a state the next call reads (VanillaRNN's hidden), or a tensor moved to the input's
    device (KernelBench's LSTM states), which is the same values at every call."""
    code, g, err = harness("inspect", "--task", str(CASES / "task_keeps_state.py"))
    assert code == 0, err
    assert g["graph"]["assigns"] == [{"name": "hidden", "node": "tanh", "from_inputs": True}]
    code, g, err = harness("inspect", "--task", str(CASES / "task_init_draws.py"))
    assert code == 0, err
    assert {a["name"]: a["from_inputs"] for a in g["graph"]["assigns"]} == {"h0": False, "c0": False}


def test_parameters_past_the_inputs_are_traced_as_their_defaults(harness):
    """A forward() parameter that get_inputs() does not give is traced as its default (the
    None branch taken, as every call takes it), leaving no placeholder and no check of it; a
    Python type given as a dtype (dtype=bool) is recorded as that dtype."""
    code, g, err = harness("inspect", "--task", str(CASES / "task_default_args.py"), "--backend", "cpu")
    assert code == 0, err
    nodes = g["graph"]["nodes"]
    assert [n["name"] for n in nodes if n["op"] == "placeholder"] == ["x"]
    targets = [n["target"] for n in nodes]
    assert "torch.zeros_like" in targets and "torch.cat" in targets, targets
    assert not any("assert" in t for t in targets), targets
    ones = next(n for n in nodes if n["target"] == "torch.ones")
    assert ones["kwargs"]["dtype"] == "bool" and ones["output"]["dtype"] == "bool", ones
    mul = next(n for n in nodes if n["target"] == "_operator.mul")
    assert mul["args"][1] == 2.0, mul  # the default scale, a constant


def test_numbers_computed_from_sizes_keep_their_value(harness):
    """A pad by x2.size(2) - x1.size(2): the graph holds the subtraction, and inspect writes the
    number it came to in this run, for a policy that bakes it into a kernel."""
    task = ROOT / "bench" / "tasks_extra" / "unet_up.py"  # cpu sizes: 9 upsampled to 18, skip 19
    code, g, err = harness("inspect", "--task", str(task), "--backend", "cpu")
    assert code == 0, err
    nodes = g["graph"]["nodes"]
    sizes = [n["value"] for n in nodes if n["target"] == "_operator.getitem" and "value" in n]
    assert sizes[:2] == [19, 18], sizes
    subs = [n["value"] for n in nodes if n["target"] == "_operator.sub"]
    assert subs == [1, 1, 1, 1], subs  # dy, dx, then dx - dx // 2 and dy - dy // 2
    assert [n["value"] for n in nodes if n["target"] == "_operator.floordiv"] == [0, 0, 0, 0]
    assert all("value" not in n for n in nodes if n.get("output", {}).get("shape"))  # tensors: none


def test_functions_kept_on_the_module_call_the_traced_copy(harness):
    """A lambda attribute whose closure holds the module's own ModuleDict (minGPT's
    ``self.mlpf``): the trace runs on a copy whose function reaches the copy's layers, so the
    graph names them as submodules instead of failing ("not installed as a submodule")."""
    code, g, err = harness("inspect", "--task", str(CASES / "task_closure_mlp.py"), "--backend", "cpu")
    assert code == 0, err
    assert g["graph"]["source"] == "fx", g.get("fx_error")
    mods = [n["target"] for n in g["graph"]["nodes"] if n["op"] == "call_module"]
    assert mods == ["norm", "ff.up", "ff.down"], mods
    assert "torch.tanh" in [n["target"] for n in g["graph"]["nodes"]]

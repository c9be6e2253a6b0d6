"""The judge's windows (kforge_harness.windows, shared, subject) in one process, on the cpu:
buffers and layouts against hostile descriptions, the runner's timed call (guarded, autograd
off, outputs written where the judge reads them), and the rule that a subject's own figure can
only lengthen a call."""

from __future__ import annotations

import os
import types

import pytest
import torch
from kforge_harness import guard, nativeguard, shared, subject, windows
from kforge_harness import runner as runnermod
from kforge_harness.policy import Policy
from kforge_harness.wire import ChannelError


def _phase(
    tmp_path, args: list, out: list
) -> tuple[subject.Phase, shared.Buffer, shared.Buffer, shared.Layout]:
    """A cpu phase for ``args`` and outputs shaped like ``out``: the judge's buffers (files in
    tmp_path) and the subject's mapping of them."""
    transport = types.SimpleNamespace(sock=None, xfer=str(tmp_path), open_arenas=lambda a: [])
    in_l, out_l = shared.Layout.of(args), shared.Layout.of(out)
    ib, idesc = shared.Buffer.make(transport, "w_in", in_l.size, [])
    ob, odesc = shared.Buffer.make(transport, "w_out", out_l.size, [])
    ib.write(in_l, shared.tensors(args))
    msg = {
        "inputs": {"buffer": idesc, "layout": in_l.describe(), "template": shared.template(args)},
        "outputs": {"buffer": odesc, "layout": out_l.describe()},
    }
    return subject.Phase(msg, transport, torch.device("cpu")), ib, ob, out_l


def test_a_phase_maps_the_inputs_and_puts_outputs_where_the_judge_reads_them(tmp_path):
    x = torch.randn(3, 5)
    phase, ib, ob, out_l = _phase(tmp_path, [x, 7], [torch.empty(3, 5)])
    assert torch.equal(phase.args[0], x) and phase.args[1] == 7
    phase.put(phase.args[0] * 2)
    (got,) = ob.view(out_l, torch.device("cpu"))
    assert torch.equal(got, x * 2)
    with pytest.raises(ValueError, match="structure"):
        phase.put(torch.zeros(5, 3))  # another shape
    with pytest.raises(ValueError, match="structure"):
        phase.put(torch.zeros(3, 5, dtype=torch.float64))
    phase.close()


@pytest.mark.parametrize(
    "layout",
    [
        [[0, "float32", [1 << 20]]],  # past the buffer's end
        [[-256, "float32", [4]]],
        [[3, "float32", [4]]],  # not aligned
        [[0, "complex64", [4]]],
        [[0, "float32", [-1]]],
        [[0, "float32", "4"]],
        "not a list",
    ],
)
def test_a_layout_outside_its_buffer_or_malformed_is_refused(layout):
    with pytest.raises(ChannelError):
        shared.Layout.parse(layout, 4096)


@pytest.mark.parametrize("tpl", [{"t": 5}, {"x": 1}, {"list": "no"}, {"v": [1]}, {"t": -1}])
def test_a_malformed_template_is_refused(tpl):
    with pytest.raises(ChannelError):
        shared.rebuild(tpl, [torch.zeros(1)])


def test_a_shared_file_cut_short_or_replaced_is_an_error_not_a_crash_or_a_hang(tmp_path):
    phase, ib, ob, out_l = _phase(tmp_path, [torch.randn(64)], [torch.empty(64)])
    path = tmp_path / shared.FOLDER / "w_out"
    with open(path, "r+b") as f:
        f.truncate(16)  # what a hostile subject could do to its output file
    with pytest.raises(ChannelError, match="cut short"):
        ob.view(out_l, torch.device("cpu"))
    # replaced by a FIFO (a read would block) or a link: the judge reads the file it made
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(ChannelError, match="cut short"):
        ob.view(out_l, torch.device("cpu"))
    path.unlink()
    path.symlink_to("/etc/passwd")
    with pytest.raises(ChannelError, match="cut short"):
        ob.view(out_l, torch.device("cpu"))


def test_the_runner_times_a_candidate_guarded_and_without_autograd_as_the_baselines(tmp_path):
    """Runner.wcall: the call runs under the compute guard with autograd off (the baselines run
    under torch.no_grad), both undone after it; the outputs land in the judge's buffer; a
    refused operator ends the call."""
    seen: list[tuple[bool, bool]] = []

    class Probe(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append((torch.is_grad_enabled(), r.in_forward))
            return torch.relu(x)

    r = runnermod.Runner.__new__(runnermod.Runner)
    r.in_forward, r.foreign, r.kernels, r.model = False, [], [], Probe()
    r.native = nativeguard.load(nativeguard.library_path(), guard.ALLOWED_OPS)[0]
    r.args = types.SimpleNamespace(format="kernelbench")
    r.device = torch.device("cpu")
    r.phase, _ib, ob, out_l = _phase(tmp_path, [torch.ones(4)], [torch.empty(4)])
    with pytest.raises(guard.ForbiddenOp):  # relu is compute: refused, and the call ends
        r.wcall({})
    assert seen == [(False, True)] and torch.is_grad_enabled() and not r.in_forward

    class Honest(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append((torch.is_grad_enabled(), r.in_forward))
            return torch.empty_like(x)

    r.model = Honest()
    reply = r.wcall({})
    assert reply["flags"] == [] and reply["own"]["ms"] >= 0, reply
    assert seen[-1] == (False, True) and torch.is_grad_enabled() and not r.in_forward
    assert r.phase.last is not None  # kept until wdone, freed outside the window
    r.wdone({})
    assert r.phase.last is None


def test_a_subjects_own_figure_only_lengthens_a_call():
    # a window of 2 ms with 0.5 ms of channel: 1.5 ms, whatever the subject says below that
    assert windows.net_ms(2.0, {"ms": 0.001}, 0.5) == (1.5, False)
    assert windows.net_ms(2.0, {"ms": 1.8}, 0.5) == (1.8, False)  # longer: believed
    assert windows.net_ms(2.0, {"ms": 5.0}, 0.5) == (1.5, True)  # longer than its window: forged
    assert windows.net_ms(2.0, {"ms": float("nan")}, 0.5) == (1.5, False)
    assert windows.net_ms(0.1, {}, 0.5)[0] > 0


def test_the_loop_warms_up_then_times_until_the_spread_is_small():
    calls = []

    def one(warm):
        calls.append(1)
        return 2.0, {"ms": 1.0}

    pol = Policy(budget_s=10.0, min_reps=5, max_reps=50, target_spread=0.01, warmup_s=0.0, warmup_min=2)
    r = windows.loop(one, pol, 0.5)
    # identical windows: the spread is 0 at the fifth timed call
    assert r["warmup"] == 2 and r["trials"] == 5 and len(calls) == 7, r
    assert r["median_ms"] == 1.5 and r["method"] == "judge_window" and r["own_over_window"] == 0, r


def test_a_mismatch_in_any_output_is_raised():
    ref = [torch.ones(1000)]
    out = [torch.ones(1000)]
    windows.check(out, ref, None, False, [])
    out[0][997] = 0.0
    with pytest.raises(windows.Mismatch):
        windows.check(out, ref, None, False, [])

"""Guards of the fused optimizer path that CUDA takes, checked on CPU.

On CUDA, ``torch._fused_adam_`` read float64 step counts as float32 and the default demo
trained NaN after one step, while CPU's kernel converted them and every CPU test passed. So:

* every fused kernel call gets arguments of the same dtypes, devices and keywords as
  PyTorch's own fused optimizer (``torch.optim.Adam(fused=True)`` / ``SGD(fused=True)``) for
  the same parameters: a wrong argument fails here, not only on a GPU;
* fused and reference steps give the same parameters and states for every setting the
  configuration allows (``training.optimizer``, ``lr`` > 0 or per-client rates,
  ``momentum`` in [0, 1), ``betas`` in [0, 1), ``eps`` > 0, ``weight_decay`` >= 0), and both
  equal ``torch.optim``'s single-tensor implementation row by row.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from privfl.fl.optim import STEP_DTYPE, StackedOptimizer
from privfl.fl.spec import LocalTrainingSpec

FUSED = ("momentum", "adam")
KERNELS = {"momentum": "_fused_sgd_", "adam": "_fused_adam_"}


def _spec(optimizer: str, **kw) -> LocalTrainingSpec:
    return LocalTrainingSpec(local_steps=1, batch_size=4, clip_norm=None, optimizer=optimizer,
                             **kw)


def _torch_optimizer(optimizer: str, params, lr, *, fused, momentum=0.9, betas=(0.9, 0.999),
                     eps=1e-8, weight_decay=0.0):
    flag = {"fused": True} if fused else {"foreach": False}
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, betas=betas, eps=eps,
                                weight_decay=weight_decay, **flag)
    return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay, **flag)


def _signature(args, kwargs) -> tuple:
    """What a kernel call's arguments are made of: per positional list, the dtype and device
    of its tensors; the keyword names and the types of their values."""
    lists = tuple(tuple(sorted({(t.dtype, t.device.type) for t in a})) for a in args)
    return lists, tuple(sorted((k, type(v).__name__) for k, v in kwargs.items()
                               if v is not None))


def _record(monkeypatch, name: str) -> list[tuple]:
    calls: list[tuple] = []
    kernel = getattr(torch, name)

    def recording(*args, **kwargs):
        calls.append(_signature(args, kwargs))
        return kernel(*args, **kwargs)

    monkeypatch.setattr(torch, name, recording)
    return calls


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("optimizer", FUSED)
def test_fused_calls_match_pytorchs_own_fused_optimizer(optimizer, dtype, monkeypatch):
    calls = _record(monkeypatch, KERNELS[optimizer])
    rows = torch.randn(3, 5, dtype=dtype)
    ours = StackedOptimizer(_spec(optimizer, lr=0.01))
    state = ours.init_state(3, 5, dtype=dtype)
    ours.step_(rows, torch.randn(3, 5, dtype=dtype), state, 0.01)
    assert len(calls) == 1, "the fused kernel was not used"
    param = torch.nn.Parameter(torch.randn(5, dtype=dtype))
    param.grad = torch.randn(5, dtype=dtype)
    _torch_optimizer(optimizer, [param], 0.01, fused=True).step()
    assert len(calls) == 2
    theirs = calls[1]
    if optimizer == "adam":  # PyTorch passes grad_scale/found_inf None: not in the signature
        assert calls[0][0][:4] == theirs[0][:4] and calls[0][0][5] == theirs[0][5]
        assert calls[0][0][5] == ((STEP_DTYPE, "cpu"),)
    else:  # SGD's first fused step passes its buffers as [] and is_first_step=True
        assert calls[0][0][:2] == theirs[0][:2]
        assert calls[0][0][2] == theirs[0][0]
    assert {k for k, _ in calls[0][1]} == {k for k, _ in theirs[1]}


def test_a_state_with_float64_steps_is_refused_by_the_step_and_converted_on_load():
    opt = StackedOptimizer(_spec("adam", lr=0.01))
    state = opt.init_state(2, 3)
    old = {**state, "step": state["step"].to(torch.float64) + 7}
    with pytest.raises(ValueError, match=r"state\['step'\] has dtype torch.float64"):
        opt.step_(torch.zeros(2, 3), torch.ones(2, 3), old, 0.01)
    loaded = opt.conform_state(old)
    assert loaded["step"].dtype == STEP_DTYPE and loaded["step"].tolist() == [7.0, 7.0]
    assert loaded["exp_avg"] is not old["exp_avg"]  # a copy


settings_allowed = st.fixed_dictionaries({
    "optimizer": st.sampled_from(["sgd", "momentum", "adam"]),
    "lr": st.floats(1e-6, 10.0),
    "per_client_lr": st.booleans(),
    "momentum": st.floats(0.0, 0.99),
    "beta1": st.floats(0.0, 0.99),
    "beta2": st.floats(0.0, 0.9999),
    "eps": st.floats(1e-10, 1.0),
    "weight_decay": st.sampled_from([0.0, 1e-4, 0.1, 2.0]),
    "dtype": st.sampled_from([torch.float32, torch.float64]),
    "rows": st.integers(1, 4),
    "steps": st.integers(1, 4),
})


@settings(max_examples=120, deadline=None)
@given(case=settings_allowed, seed=st.integers(0, 2**31 - 1))
@example(case={"optimizer": "adam", "lr": 1.875, "per_client_lr": False, "momentum": 0.0,
               "beta1": 0.533203125, "beta2": 0.0, "eps": 0.001953125, "weight_decay": 2.0,
               "dtype": torch.float32, "rows": 4, "steps": 3}, seed=0)
def test_fused_and_reference_steps_agree_with_torch_optim(case, seed):
    gen = torch.Generator().manual_seed(seed)
    m, d, dtype = case["rows"], 7, case["dtype"]
    spec = _spec(case["optimizer"], lr=case["lr"], momentum=case["momentum"],
                 betas=(case["beta1"], case["beta2"]), eps=case["eps"],
                 weight_decay=case["weight_decay"])
    lr: float | torch.Tensor = case["lr"]
    if case["per_client_lr"]:  # some rows share a rate (one fused call per distinct rate)
        lr = torch.tensor([case["lr"] * (1 + (j % 2)) for j in range(m)], dtype=dtype)
        lr = lr.reshape(m, 1)
    start = torch.randn(m, d, generator=gen, dtype=dtype)
    grads = [torch.randn(m, d, generator=gen, dtype=dtype) for _ in range(case["steps"])]
    def run(fused: bool, as_dtype: torch.dtype) -> tuple[torch.Tensor, dict]:
        opt = StackedOptimizer(spec)
        opt._fused_ok = fused
        rates = lr.to(as_dtype) if isinstance(lr, torch.Tensor) else lr
        params, state = start.to(as_dtype, copy=True), opt.init_state(m, d, dtype=as_dtype)
        for g in grads:
            opt.step_(params, g.to(as_dtype, copy=True), state, rates)
        return params, state

    results = {fused: run(fused, dtype) for fused in (True, False)}
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else \
        {"rtol": 1e-11, "atol": 1e-11}
    scale = 1.0 + case["lr"] * case["steps"] * 10  # parameters move by up to lr per step
    fused_params, fused_state = results[True]
    ref_params, ref_state = results[False]
    # float32: two summation orders may differ by a few times the float32 reference's own error
    # (against float64), which an ill-conditioned step amplifies (Adam with beta2 = 0 divides by
    # |g + wd p|, near zero: 2.6e-5 relative seen at lr 1.875, weight decay 2, 3 steps); a wrong
    # formula (a bias correction, a decay applied twice) is off by far more
    exact_params, exact_state = run(False, torch.float64)

    def assert_agree(got: torch.Tensor, ref: torch.Tensor, exact: torch.Tensor) -> None:
        got, ref = got.double(), ref.double()
        slack = 4 * (ref - exact).abs() if dtype == torch.float32 else 0.0
        allowed = tol["atol"] * scale + tol["rtol"] * ref.abs() + slack
        assert ((got - ref).abs() <= allowed).all(), (got, ref, exact)

    assert_agree(fused_params, ref_params, exact_params)
    for key in fused_state:
        assert fused_state[key].dtype == ref_state[key].dtype
        assert_agree(fused_state[key], ref_state[key], exact_state[key])
    for j in range(m):  # torch.optim's single-tensor implementation, row by row
        param = torch.nn.Parameter(start[j].clone())
        rate = float(lr[j]) if isinstance(lr, torch.Tensor) else lr
        theirs = _torch_optimizer(case["optimizer"] if case["optimizer"] == "adam" else "sgd",
                                  [param], rate, fused=False,
                                  momentum=case["momentum"] if case["optimizer"] == "momentum"
                                  else 0.0, betas=(case["beta1"], case["beta2"]),
                                  eps=case["eps"], weight_decay=case["weight_decay"])
        for g in grads:
            param.grad = g[j].clone()
            theirs.step()
        assert_agree(param.detach(), ref_params[j], exact_params[j])


def test_per_client_rates_changed_in_place_between_steps_are_read_again():
    """The rows of equal rate are cached for a tensor reused across steps; an in-place change
    of that tensor is seen (never a stale grouping)."""
    opt = StackedOptimizer(_spec("momentum", lr=0.1, momentum=0.5))
    params, state = torch.zeros(2, 3), opt.init_state(2, 3)
    lr = torch.tensor([[0.1], [0.1]])
    opt.step_(params, torch.ones(2, 3), state, lr)
    lr[1, 0] = 0.3
    opt.step_(params, torch.ones(2, 3), state, lr)
    # row 0: 0.1 * (1) + 0.1 * (0.5 + 1); row 1: 0.1 * 1 + 0.3 * 1.5
    torch.testing.assert_close(params[:, 0], -torch.tensor([0.25, 0.55]))

"""sum_one_at_a_time: the sum's value and gradient, each part differentiated on its own."""

from __future__ import annotations

import torch

from fleet_rl.training.precomputed_gradient import sum_one_at_a_time


def _parts(weight: torch.Tensor, inputs: list[torch.Tensor]):
    return [lambda x=x: (torch.tanh(x @ weight) ** 2).sum() for x in inputs]


def test_value_and_gradient_are_the_sums_scaled_by_what_follows():
    torch.manual_seed(0)
    weight = torch.randn(4, 3, requires_grad=True)
    unused = torch.randn(2, requires_grad=True)  # no part reads it: no gradient, no error
    inputs = [torch.randn(5, 4), torch.randn(2, 4), torch.randn(7, 4)]

    expected_value = sum(part() for part in _parts(weight, inputs))
    (2.5 * expected_value).backward()
    expected_gradient = weight.grad.clone()
    weight.grad = None

    value = sum_one_at_a_time(_parts(weight, inputs), [weight, unused])
    assert weight.grad is None  # nothing lands before the caller's backward pass
    (2.5 * value).backward()
    assert torch.allclose(value.detach(), expected_value.detach(), rtol=1e-6)
    assert torch.allclose(weight.grad, expected_gradient, rtol=1e-5, atol=1e-7)
    assert unused.grad is None


def test_without_gradients_it_is_the_plain_sum():
    weight = torch.randn(4, 3, requires_grad=True)
    inputs = [torch.randn(3, 4), torch.randn(1, 4)]
    with torch.no_grad():
        value = sum_one_at_a_time(_parts(weight, inputs), [weight])
    assert not value.requires_grad
    assert torch.allclose(value, sum(part() for part in _parts(weight, inputs)).detach())
    assert float(sum_one_at_a_time([], [weight])) == 0.0

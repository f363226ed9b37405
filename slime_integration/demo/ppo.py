"""A small but real PPO on a contextual bandit, split the way slime splits it.

The actor (policy) samples an arm for each context and is trained with PPO's clipped objective
against advantages ``reward - V(context)``; the critic (value network) is trained to predict the
reward of a context under the current policy. Each side is data-parallel over its own
torch.distributed world: gradients are averaged over the Megatron data-parallel group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class Bandit:
    """Rewards ``x @ W[:, a] + noise``: which arm is best depends on the context."""

    dim: int = 8
    arms: int = 4
    noise: float = 0.1
    seed: int = 1234

    def weights(self) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed)
        return torch.randn(self.dim, self.arms, generator=gen)

    def contexts(self, n: int, gen: torch.Generator) -> torch.Tensor:
        return torch.randn(n, self.dim, generator=gen)

    def reward(self, x: torch.Tensor, a: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        means = x @ self.weights()
        picked = means.gather(1, a.unsqueeze(1)).squeeze(1)
        return picked + self.noise * torch.randn(picked.shape, generator=gen)

    def optimal(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.weights()).argmax(dim=1)


def mlp(inputs: int, hidden: int, outputs: int) -> nn.Module:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.Tanh(), nn.Linear(hidden, outputs))


def average_gradients(module: nn.Module, group: Any) -> None:
    """Data parallelism: every replica steps with the mean gradient of the group."""
    size = dist.get_world_size(group)
    if size == 1:
        return
    for param in module.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, group=group)
            param.grad /= size


def global_mean(values: dict[str, float], group: Any) -> dict[str, float]:
    """The mean of each statistic over the data-parallel group (what the writer logs)."""
    keys = sorted(values)
    tensor = torch.tensor([values[k] for k in keys], dtype=torch.float64)
    size = dist.get_world_size(group)
    if size > 1:
        dist.all_reduce(tensor, group=group)
        tensor /= size
    return {k: float(v) for k, v in zip(keys, tensor.tolist(), strict=True)}


@torch.no_grad()
def rollout(policy: nn.Module, bandit: Bandit, n: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    x = bandit.contexts(n, gen)
    dist_ = torch.distributions.Categorical(logits=policy(x))
    a = torch.multinomial(dist_.probs, 1, generator=gen).squeeze(1)
    return {
        "x": x,
        "a": a,
        "logp": dist_.log_prob(a),
        "r": bandit.reward(x, a, gen),
        "optimal": (a == bandit.optimal(x)).float(),
    }


def ppo_update(
    policy: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, torch.Tensor],
    advantages: torch.Tensor,
    *,
    clip: float,
    epochs: int,
    entropy_coef: float,
    kl_coef: float,
    group: Any,
) -> dict[str, float]:
    adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    stats: dict[str, float] = {}
    for _ in range(epochs):
        dist_ = torch.distributions.Categorical(logits=policy(batch["x"]))
        logp = dist_.log_prob(batch["a"])
        ratio = torch.exp(logp - batch["logp"])
        pg_loss = -torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).mean()
        entropy = dist_.entropy().mean()
        approx_kl = (batch["logp"] - logp).mean()
        loss = pg_loss - entropy_coef * entropy + kl_coef * approx_kl
        optimizer.zero_grad()
        loss.backward()
        average_gradients(policy, group)
        grad_norm = math.sqrt(
            sum(float(p.grad.pow(2).sum()) for p in policy.parameters() if p.grad is not None)
        )
        optimizer.step()
        stats = {
            "pg_loss": float(pg_loss),
            "entropy": float(entropy),
            "approx_kl": float(approx_kl),
            "clipfrac": float(((ratio - 1).abs() > clip).float().mean()),
            "grad_norm": grad_norm,
        }
    return stats


def value_update(
    value: nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    returns: torch.Tensor,
    *,
    epochs: int,
    group: Any,
) -> dict[str, float]:
    stats: dict[str, float] = {}
    for _ in range(epochs):
        pred = value(x).squeeze(1)
        loss = (pred - returns).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        average_gradients(value, group)
        optimizer.step()
        var = float(returns.var())
        stats = {
            "value_loss": float(loss),
            "explained_variance": 1.0 - float((returns - pred.detach()).var()) / max(var, 1e-8),
        }
    return stats

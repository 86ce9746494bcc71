"""collate(), Batch, ParallelData and the token-budget batch sampler."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from seq2seq.data.batching import Batch, ParallelData, TokenBatchSampler, collate
from seq2seq.special_tokens import BOS_ID, EOS_ID, PAD_ID

E, B, P = EOS_ID, BOS_ID, PAD_ID


def test_collate_builds_exact_tensors():
    batch = collate([([5, 6], [7]), ([8], [9, 10, 11])], indices=[3, 1])
    assert batch.src.tolist() == [[5, 6, E], [8, E, P]]
    assert batch.src_mask.tolist() == [[True, True, True], [True, True, False]]
    assert batch.src_lengths.tolist() == [3, 2]
    assert batch.tgt_in.tolist() == [[B, 7, P, P], [B, 9, 10, 11]]
    assert batch.tgt_out.tolist() == [[7, E, P, P], [9, 10, 11, E]]
    assert batch.tgt_mask.tolist() == [[True, True, False, False], [True, True, True, True]]
    assert batch.indices == [3, 1]
    assert (batch.num_src_tokens, batch.num_tgt_tokens) == (5, 6)
    assert batch.src.dtype == batch.tgt_in.dtype == torch.long
    assert batch.src_mask.dtype == torch.bool
    assert len(batch) == 2


def test_collate_rejects_mismatched_indices():
    with pytest.raises(ValueError, match="indices"):
        collate([([5], [6])], indices=[0, 1])


def test_batch_to_moves_every_tensor():
    batch = collate([([5, 6], [7])], indices=[0]).to("meta")
    tensors = [value for value in vars(batch).values() if isinstance(value, torch.Tensor)]
    assert len(tensors) == 6 and all(t.device.type == "meta" for t in tensors)
    assert batch.indices == [0] and isinstance(batch, Batch)


def test_parallel_data_lengths_batch_and_select():
    data = ParallelData([([5, 6], [7]), ([8], [9, 10])], ["s0", "s1"], ["t0", "t1"])
    assert data.src_lengths == [3, 2] and data.tgt_lengths == [2, 3]
    assert data[1] == ([8], [9, 10]) and len(data) == 2
    assert data.batch([1]).src.tolist() == [[8, E]]
    picked = data.select([1])
    assert picked.examples == [([8], [9, 10])] and picked.tgt_lines == ["t1"]
    with pytest.raises(ValueError, match="as many"):
        ParallelData([([5], [6])], ["s0", "s1"], ["t0"])


def random_lengths(count: int, seed: int) -> tuple[list[int], list[int]]:
    rng = np.random.default_rng(seed)
    src = rng.integers(2, 30, size=count)  # (count,)
    tgt = np.clip(
        src + rng.integers(-5, 6, size=count), 2, 35
    )  # (count,) correlated, like translations
    return src.tolist(), tgt.tolist()


def padded_size(batch: list[int], src: list[int], tgt: list[int]) -> int:
    return len(batch) * max(max(src[i] for i in batch), max(tgt[i] for i in batch))


@pytest.mark.parametrize("shuffle", [True, False])
def test_sampler_budget_and_every_example_once(shuffle):
    src, tgt = random_lengths(500, seed=0)
    sampler = TokenBatchSampler(src, tgt, max_tokens=100, shuffle=shuffle, seed=5)
    for epoch in range(3):
        batches = sampler.batches(epoch)
        assert all(padded_size(batch, src, tgt) <= 100 for batch in batches)
        assert sorted(i for batch in batches for i in batch) == list(range(500))


def test_sampler_order_depends_on_seed_and_epoch_only():
    src, tgt = random_lengths(500, seed=0)
    sampler = TokenBatchSampler(src, tgt, max_tokens=100, shuffle=True, seed=5)
    twin = TokenBatchSampler(src, tgt, max_tokens=100, shuffle=True, seed=5)
    assert sampler.batches(2) == twin.batches(2)  # what resuming at (epoch, position) relies on
    assert sampler.batches(2) != sampler.batches(3)
    assert TokenBatchSampler(src, tgt, 100, True, seed=6).batches(2) != sampler.batches(2)


def test_batches_change_content_between_epochs_not_only_order():
    src, tgt = random_lengths(500, seed=0)
    sampler = TokenBatchSampler(src, tgt, max_tokens=100, shuffle=True, seed=5)
    as_sets = [{frozenset(batch) for batch in sampler.batches(epoch)} for epoch in (0, 1)]
    assert as_sets[0] != as_sets[1]


def test_length_bucketing_keeps_padding_low():
    src, tgt = random_lengths(2000, seed=1)
    sampler = TokenBatchSampler(src, tgt, max_tokens=300, shuffle=True, seed=0)
    bucketed = sampler.padding_ratio(sampler.batches(0))
    order = np.random.default_rng(0).permutation(2000).tolist()
    unsorted = [order[start : start + 10] for start in range(0, 2000, 10)]
    assert bucketed < 0.1 < sampler.padding_ratio(unsorted)


def test_padding_ratio_against_hand_count():
    sampler = TokenBatchSampler([2, 4, 3], [5, 1, 3], max_tokens=100, shuffle=False)
    # batch [0, 1]: src 2*4 positions for 6 real, tgt 2*5 for 6 real; batch [2]: 3+3 real
    assert sampler.padding_ratio([[0, 1], [2]]) == pytest.approx(1 - 18 / 24)


def test_example_longer_than_the_budget_is_an_error():
    with pytest.raises(ValueError, match="example 1 has 40 tokens"):
        TokenBatchSampler([3, 40], [3, 3], max_tokens=30)


def test_short_first_epochs_keep_batches_in_increasing_length_then_shuffle():
    src, tgt = random_lengths(500, seed=0)
    sampler = TokenBatchSampler(src, tgt, 100, shuffle=True, seed=5, short_first_epochs=2)
    plain = TokenBatchSampler(src, tgt, 100, shuffle=True, seed=5)

    def longest(batch: list[int]) -> int:
        return max(max(src[i], tgt[i]) for i in batch)

    for epoch in (0, 1):
        batches = sampler.batches(epoch)
        assert [longest(b) for b in batches] == sorted(longest(b) for b in batches)
        # the same batches as a shuffled epoch, only in another order
        assert sorted(map(sorted, batches)) == sorted(map(sorted, plain.batches(epoch)))
    assert sampler.batches(2) == plain.batches(2)
    lengths = [longest(b) for b in sampler.batches(2)]
    assert lengths != sorted(lengths)


def test_short_first_epochs_must_not_be_negative():
    with pytest.raises(ValueError, match="short_first_epochs must be >= 0"):
        TokenBatchSampler([3], [3], max_tokens=30, short_first_epochs=-1)


def greedy_pack_one_by_one(sizes: np.ndarray, order: np.ndarray, max_tokens: int) -> list:
    """The definition, one example at a time: start a new batch when the next example would
    take batch_size * longest over the budget."""
    batches, current, longest = [], [], 0
    for index in order.tolist():
        longest_with = max(longest, int(sizes[index]))
        if current and (len(current) + 1) * longest_with > max_tokens:
            batches.append(current)
            current, longest_with = [], int(sizes[index])
        current.append(index)
        longest = longest_with
    return batches + ([current] if current else [])


@pytest.mark.parametrize("max_tokens", [7, 64, 300, 2048])
def test_packing_equals_the_one_by_one_greedy_definition(max_tokens):
    rng = np.random.default_rng(max_tokens)
    src = rng.integers(1, 8, size=3000)  # up to 7 tokens: every example fits max_tokens=7
    tgt = rng.integers(1, 8, size=3000)
    sampler = TokenBatchSampler(src, tgt, max_tokens=max_tokens, seed=3)
    for epoch in range(2):
        got = sampler.batches(epoch)
        assert sorted(got) == sorted(
            greedy_pack_one_by_one(sampler.sizes, _order(sampler, epoch), max_tokens)
        )


def _order(sampler: TokenBatchSampler, epoch: int) -> np.ndarray:
    """The sorted order `batches` packs (the same draw as the sampler's)."""
    rng = np.random.default_rng([sampler.seed, epoch])
    order = rng.permutation(len(sampler.sizes))
    keys = (sampler.tgt_lengths[order], sampler.src_lengths[order], sampler.sizes[order])
    return order[np.lexsort(keys)]  # longer side, then source, then target; ties as drawn


@pytest.mark.parametrize("shuffle", [True, False])
def test_epoch_batches_read_like_the_list_of_their_batches(shuffle):
    src, tgt = random_lengths(300, seed=2)
    batches = TokenBatchSampler(src, tgt, max_tokens=80, shuffle=shuffle, seed=1).batches(1)
    as_list = [batches[i] for i in range(len(batches))]
    assert all(type(index) is int for batch in as_list for index in batch)
    assert list(batches) == as_list and batches == as_list and as_list == batches
    assert batches[-1] == as_list[-1] and batches[2:5] == as_list[2:5]
    assert batches[::-3] == as_list[::-3]
    with pytest.raises(IndexError):
        batches[len(batches)]
    assert batches != as_list[:-1] and batches != [*as_list[:-1], as_list[-1][:-1]]
    assert len(batches) == len(as_list) and len(as_list) > 5

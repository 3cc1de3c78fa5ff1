"""The warm-up skipped over a cached prefix (`warm_prefixes.py`): the record's rule on its own, then
over real HTTP against the fake SGLang's scheduler, counting `/generate` calls, steps and prefill."""

import httpx
import pytest

from openjev.backends.warm_prefixes import WarmPrefixes
from openjev.prompting.prompt_ids import SharedIds
from openjev.request.images import ImageInput
from tests.fake_sglang.batch import rids_of

PREFIX = SharedIds(list(range(1000, 1100)))  # 100 tokens


def test_a_prefix_is_cached_until_its_rank_has_taken_the_cache_share_since():
    record = WarmPrefixes(pool_tokens=1000, share=0.5)  # 500 tokens counted on

    def use(prefix: SharedIds, tokens: int, rank: int | None = None) -> bool:
        used = record.begin(prefix, (), rank, tokens)
        record.settle(used, [len(prefix.ids)])
        return used.cached

    assert not use(PREFIX, 150)  # never sent
    assert use(PREFIX, 150)  # its own branches hang below it: not counted against it
    assert not use(SharedIds([7] * 50), 300)
    assert use(PREFIX, 150)  # 300 other tokens since, + its 100 <= 500
    assert not use(SharedIds([8] * 50), 401)
    assert not use(PREFIX, 150)  # 401 + 100 > 500
    assert not use(PREFIX, 150, rank=1)  # another rank, another cache
    assert use(PREFIX, 150)


def test_images_name_the_prefix_and_no_pool_or_no_share_skips_nothing():
    record = WarmPrefixes(pool_tokens=10_000, share=0.5)
    cat = ImageInput(b"", "a" * 64, 1, 1)
    record.settle(record.begin(PREFIX, (cat,), None, 200), [100])
    assert record.begin(PREFIX, (cat,), None, 200).cached
    assert not record.begin(PREFIX, (ImageInput(b"", "b" * 64, 1, 1),), None, 200).cached
    assert not record.begin(PREFIX, (), None, 200).cached
    for unknowing in (WarmPrefixes(None, 0.5), WarmPrefixes(10_000, 0.0)):
        unknowing.settle(unknowing.begin(PREFIX, (), None, 200), [100])
        assert not unknowing.begin(PREFIX, (), None, 200).cached


def test_branches_that_found_less_than_after_the_warm_up_forget_the_prefix():
    record = WarmPrefixes(pool_tokens=10_000, share=0.5)
    record.settle(record.begin(PREFIX, (), None, 200), [100, 120])  # a hybrid model may find less
    skipped = record.begin(PREFIX, (), None, 200)
    assert skipped.cached
    record.settle(skipped, [100, 100])  # as much as after the warm-up: still cached
    skipped = record.begin(PREFIX, (), None, 200)
    record.settle(skipped, [100, 3])  # one branch prefilled the prefix: the cache lost it
    assert not record.begin(PREFIX, (), None, 200).cached
    rust = WarmPrefixes(pool_tokens=10_000, share=0.5)  # a backend that reports no cached tokens
    rust.settle(rust.begin(PREFIX, (), None, 200), [None, None])
    assert rust.begin(PREFIX, (), None, 200).cached


def test_a_conversation_grown_by_a_few_tokens_over_a_cached_one_skips_its_warm_up_too():
    record = WarmPrefixes(pool_tokens=10_000, share=0.5)
    record.settle(record.begin(PREFIX, (), None, 200), [100])  # warmed up: the 100 ids are cached
    grown = SharedIds([*PREFIX.ids, *range(5000, 5030)])  # one more message: 30 new ids
    use = record.begin(grown, (), None, 200, known=100)
    assert use.cached and use.known_tokens == 100
    record.settle(use, [100, 100])  # its branches found the known ids, then prefilled the rest
    again = SharedIds([*grown.ids, *range(6000, 6040)])
    assert record.begin(again, (), None, 200, known=len(grown.ids)).cached  # and so on, message by message
    # Too much new text, nothing known, or a known part never sent: the warm-up goes first.
    assert not record.begin(SharedIds([*PREFIX.ids, *range(300)]), (), None, 200, known=100).cached
    assert not record.begin(SharedIds([*PREFIX.ids, 1, 2]), (), None, 200, known=0).cached
    assert not record.begin(SharedIds([*range(130)]), (), None, 200, known=100).cached
    # A prefix showing an image is never an extension: its image is not in the known ids' key.
    assert not record.begin(SharedIds([*PREFIX.ids, 5, 6]), (ImageInput(b"", "c" * 64, 1, 1),), None, 200, 100).cached
    # Branches that found less than the known ids: the cache lost them, so they warm up again.
    lost = record.begin(SharedIds([*PREFIX.ids, 7, 8]), (), None, 200, known=100)
    assert lost.cached
    record.settle(lost, [3, 3])
    assert not record.begin(SharedIds([*PREFIX.ids, 9]), (), None, 200, known=100).cached


QUESTIONS = {f"q{i}": {"type": "noul", "instructions": f"Is point {i} in the report?"} for i in range(8)}
STATE = "Quarterly report. " + "Revenue grew in every region and costs fell. " * 60


@pytest.mark.parametrize("share", ["0.5", "0"])
def test_a_cached_prefix_is_answered_in_one_step_and_an_evicted_one_once_in_one_more(
    serve_openjev, fake_sglang, qwen_tokenizer_dir, share
):
    # Requests arriving while a step runs wait for the next one, as in SGLang's event loop.
    fake_sglang.scheduler.step_seconds = 0.2
    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env={"OPENJEV_WARM_PREFIX_SHARE": share}
    )
    body = {"model": "jev-latest", "state": STATE, "questions": QUESTIONS}

    scheduler = fake_sglang.scheduler

    def ask() -> tuple[dict, int, int, int]:
        calls, steps, prefilled = len(fake_sglang.generate_calls), scheduler.steps, scheduler.prefilled
        response = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=30)
        assert response.status_code == 200, response.text
        return (
            response.json()["answers"],
            len(fake_sglang.generate_calls) - calls,
            scheduler.steps - steps,
            scheduler.prefilled - prefilled,
        )

    first, calls, steps, cold = ask()
    prefix = fake_sglang.generate_calls[-9]["body"]["input_ids"]
    assert calls == 9 and steps == 2 and len(prefix) > 400  # the warm-up's step, then the branches'
    # The branches went out as one batched call, in one step.
    assert [len(rids_of(post["body"])) for post in fake_sglang.generate_posts[-2:]] == [1, 8]
    assert scheduler.step_sizes[-2:] == [1, 8]
    assert cold < len(prefix) + 8 * 40  # the prefix prefilled once
    again, calls, steps, warm = ask()
    assert again == first
    if share == "0":
        assert (calls, steps) == (9, 2)  # the warm-up awaited again
    else:
        assert (calls, steps, warm) == (8, 1, 8)  # one step; each branch computes its last token only
    # The cache loses everything behind openjev's back: the next request pays for it once.
    assert httpx.post(f"{fake_sglang.url}/flush_cache").status_code == 200
    lost, calls, steps, evicted = ask()
    assert lost == first
    if share == "0":
        assert (calls, steps) == (9, 2) and evicted == cold
        return
    assert (calls, steps) == (8, 1) and evicted > 8 * len(prefix)  # each branch prefilled the prefix
    after, calls, steps, _ = ask()
    assert after == first and (calls, steps) == (9, 2)  # the record forgot it: warmed up again
    assert fake_sglang.violations == []


def test_a_chat_grown_by_a_message_skips_its_warm_up_on_the_running_server(
    serve_openjev, fake_sglang, qwen_tokenizer_dir
):
    """The extension skip (`warm_prefixes.py`, EXTENSION_TOKENS) through the server: a conversation grown
    by a short message sends its branches at once, each prefilling only the new tokens after the known
    ones; one grown by more than EXTENSION_TOKENS, or whose known part the cache lost, is warmed up."""
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir))
    scheduler = fake_sglang.scheduler
    chat = [{"role": "user", "content": STATE}, {"role": "assistant", "content": "Noted."}]

    def ask(messages: list[dict]) -> tuple[list[int], int]:
        posts, prefilled = len(fake_sglang.generate_posts), scheduler.prefilled
        body = {"model": "jev-latest", "state": messages, "questions": QUESTIONS}
        response = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=30)
        assert response.status_code == 200, response.text
        return [
            len(rids_of(post["body"])) for post in fake_sglang.generate_posts[posts:]
        ], scheduler.prefilled - prefilled

    assert ask(chat)[0] == [1, 8]  # the warm-up, then the branches
    chat += [{"role": "user", "content": "And the costs?"}, {"role": "assistant", "content": "They fell."}]
    sizes, grown = ask(chat)
    assert sizes == [8]  # no warm-up: the known part is cached
    assert 8 * 10 < grown < 8 * 80  # each branch prefilled the new message and its own question only
    chat += [{"role": "user", "content": "Revenue by region, in detail, please. " * 40}]
    assert ask(chat)[0] == [1, 8]  # over EXTENSION_TOKENS of new text: warmed up first
    assert httpx.post(f"{fake_sglang.url}/flush_cache").status_code == 200
    chat += [{"role": "assistant", "content": "Here it is."}, {"role": "user", "content": "Thanks."}]
    sizes, lost = ask(chat)
    assert sizes == [8] and lost > 8 * len(STATE) // 10  # each branch prefilled the lost conversation
    chat += [{"role": "assistant", "content": "You are welcome."}, {"role": "user", "content": "Bye."}]
    assert ask(chat)[0] == [1, 8]  # the record forgot the lost part: warmed up again
    assert fake_sglang.violations == []

"""A deterministic corpus of diverse completions, and the parse outcomes recorded for it.

``tests/rewards/test_parse_golden.py`` checks that ``parse_plan`` still gives every completion of the corpus
the recorded ``(error, num_candidates, plan, detail)``: the golden file pins the parser's behaviour, so the
parser can be rewritten without keeping an old copy of it in the tests. Record it again only after a change
of behaviour that is meant (and say so in the commit):

    python -m tests.rewards.parse_corpus --write

The corpus (``completions(base_plans)``, ~13,000 completions, fixed seed) holds

- realistic answers: plans from the baselines on scenarios of every tier (stored in the golden file, so the
  corpus does not depend on the scenario generator), valid or perturbed, with schema errors (wrong keys,
  enum case, types, bounds), in three JSON layouts, bare, amid prose with stray braces and quotes, in
  ```json / ``` / other-language / unclosed fences, after or inside think blocks (closed, unclosed, a
  leading ``</think>``), truncated, spliced with noise, nested too deep, several plans, as TRL message lists,
  padded past ``MAX_COMPLETION_CHARS``;
- hand-written edge cases and every truncation of a plan in the shapes the parser treats specially;
- markup and bracket soups (tags, fences, braces, quotes, backslashes), random text, adversarial 20k inputs,
  and completions that are not text at all.

Each golden line is ``[completion hash, error, num_candidates, plan hash, detail]``: the hashes are short
sha256 prefixes (of the completion's text or ``repr``, and of ``msgspec.json.encode(plan)``), which keeps the
file small and tells a changed corpus apart from a changed parser.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path

import msgspec

from tests.rewards.golden_file import command_line, read_lines, write_lines

GOLDEN = Path(__file__).parent / "data" / "parse_golden.jsonl.gz"
SEED = 20_260_610
MAX_CHARS = 20_000  # rewards.parsing.MAX_COMPLETION_CHARS when the corpus was recorded
NESTING = 32  # rewards.parsing.MAX_NESTING likewise

# --- Fixed plans and edge cases (formerly tests/rewards/test_throughput_parsing.py)

PRECISION = {"embedding": "bf16", "attention": "bf16", "mlp": "fp8", "norm": "fp32", "lm_head": "bf16"}
PLAN = {
    "jobs": [
        {"id": "chat", "gpus": 2, "tensor_parallel": 2, "kv_cache": "fp8", "precision": PRECISION},
        {"id": "tune", "gpus": 6, "tensor_parallel": 1, "micro_batch_size": 2,
         "activation_checkpointing": True, "precision": {**PRECISION, "attention": "int4", "mlp": "int4"}},
    ]
}  # fmt: skip
P = json.dumps(PLAN)
P2 = json.dumps({"jobs": [{**PLAN["jobs"][0], "gpus": 4}, PLAN["jobs"][1]]})
BIG = json.dumps(
    {"jobs": [{**PLAN["jobs"][0], "id": f"j{i}", "gpus": 1, "tensor_parallel": 1} for i in range(16)]}
)
WRONG = P.replace('"mlp": "fp8"', '"mlp": "FP8"')

EDGE_CASES: list[object] = [
    P,
    f"  \n{P}\n\n",
    f"Here: {P} -- done",
    f"```json\n{P}\n```",
    f"prose\n```json\n{P}\n```\nmore prose {{braces}}",
    f"```JSON\n{P}\n```",
    f"```jsonc\n{P}\n```",
    f"```\n{P}\n```",
    f"```python\nx = {{}}\n```\n{P}",
    f"```json\n{P}\n```\n```json\n{P2}\n```",
    f"```json\n{P}\n```\n```\n{P2}\n```",
    f'```json\n{{"a": 1}}\n```\n{P}',
    f"```json\n{P}\n``` and ``inline`` backticks",
    f"```json\n{P}\n````",
    f"`{P}`",
    f"```json\n{P}",
    f"```json\n{P[:80]}",
    f"Draft {P2}\n```json\n{P[:120]}",
    f"```json\n{P[:-3]}",
    f"```json\n{P[:-1]}",
    P[: len(P) // 2],
    P[:-1],
    '{"jobs": [{"id": "a", "gpus": t}',
    '{"a": t}',
    '{"a": [1, fa]}',
    '```json\n{"a": n}',
    '{"jobs": [{"id": "a", "x": {"y": t}',
    '{"a": {"jobs": []}',
    '{"plan": {"jobs": [1, 2]}',
    '{"x": "{\\"jobs\\": []}"',
    '{"\\u006aobs": []}',
    '{"x": 1} {"\\u006aobs": []',
    WRONG,
    f"```json\n{WRONG}\n```",
    f"{WRONG} {P}",
    f"{P} {{",
    f"{P} }}",
    f"{{ {P}",
    P + " " + "{" * (NESTING + 1),
    P + " {" + "[" * NESTING,
    '{"a": {"jobs": []}, "b": 12345',
    '```json\n{"a": {"jobs": []}, "b": "xyz',
    '{"a": {"x": 1}, "b": {"jobs": [], "c": 1}, "d": 1',
    "{" * (NESTING + 1),
    '{"jobs":' + "[" * (NESTING - 1) + "]" * (NESTING - 1) + "}",
    '{"jobs":' + "[" * NESTING + "]" * NESTING + "}",
    '{"a":' * (NESTING + 1) + "1" + "}" * (NESTING + 1),
    BIG,
    BIG.replace('"bf16"', '"BF16"'),
    f"```json\n{BIG[:-5]}",
    '{"jobs": [], "jobs": []}',
    '{"jobs": 5, ]',
    '{"jobs": [}',
    '{"jobs": [],}',
    "{}",
    "{} {}",
    '{"a": 1}',
    "[1, 2]",
    P.replace('"chat"', '"a}b"').replace('"tune"', '"t{\\"q\\"}"'),
    P.replace('"chat"', '"\\ud800"'),
    P.replace('"chat"', '"\ud800"'),
    P.replace(" ", "\u00a0", 3),
    P.replace(" ", "\x0c"),
    "\x0c" + P,
    f"<think>{P2}</think>{P}",
    f"<think>{P2}</think>\n```json\n{P}\n```",
    f"<think>a</think> <think>b</think> {P}",
    f"<think>a</think> <b> {P}",
    f"<think>unclosed {P}",
    f"reasoning {P2} </think> {P}",
    f"</think>{P}</think>{P2}",
    f"<think></think><think>{P}",
    f"<THINK>{P2}</THINK>{P}",
    "",
    "no json here",
    "{",
    "}",
    '"',
    "\\",
    "```",
    "```json",
    "```json\n",
    "<think>",
    "</think>",
    None,
    5,
    2.5,
    b"{}",
    bytearray(b"{}"),
    {"role": "assistant", "content": P},
    PLAN,
    [],
    ["just a string in a list"],
    [{"role": "assistant", "content": f"```json\n{P}\n```"}],
    [{"role": "assistant", "content": [{"type": "text", "text": P[:50]}, {"type": "text", "text": P[50:]}]}],
    [{"role": "assistant", "content": [{"type": "text", "text": P[:50]}, {"type": "image"}, P[50:]]}],
    [{"role": "assistant", "content": None}],
    [{"role": "assistant", "content": [{"type": "text", "text": 5}]}],
    [{"role": "assistant", "content": P}, {"role": "user", "content": "again"}],
    [{"role": "user", "content": P}],
    ({"role": "assistant", "content": P},),
    P + " " * MAX_CHARS,
    " " * (MAX_CHARS - len(P)) + P,
    " " * (MAX_CHARS - len(P) + 1) + P,
]

# The shapes whose truncations the parser answers without scanning (or must not): every cut of P in each.
TRUNCATION_SHAPES = [
    "{}",
    "Plan:\n```json\n{}",
    "<think>a</think>\n{}",
    "<think>a</think>\nPlan:\n```json\n{}",
    "Plan: {}",
    "{} and some prose after it",
    "{{ {}",
    "Draft {{\n```json\n{}",
    "```\n{}",
    "```json\n{}\n```",
    "<think>a</think> <b> ```json\n{}",
]

# --- Building blocks of the random families

WORDS = ["Let", "me", "think.", "use", "fp8", "for", "the", "mlp", "x", "1", "step", "->", "if", "(a)", "\n"]
STRAY = ["{", "[", "}", "]", "{ ", "[[", "{{", "use {fp8} here", "{x}", "{mlp: fp8}", "f(x) { return x[0]; }"]
QUOTED = ['"fast"', '"{"', "'{'", '"jobs" key', "a < b", "`code`", "\\n", "it's"]
MARKUP = [
    "{", "}", "[", "]", '"', "\\", ":", ",", " ", "\n", "x", "1", "t", "true", "nul", '"jobs"',
    '"\\u006aobs"', "<think>", "</think>", "```", "```json\n", "```JSON\n", "```\n", "`", "<",
    P, P2, WRONG, P[:40], P[40:],
]  # fmt: skip
BRACKET_CHARS = '{}[]"\\ xa:'
BRACKET_TOKENS = ["{", "}", "[", "]", '"', "\\", '"jobs"', "x", ":", " ", "{}", '{"a":1}']
FENCE_TAGS = [
    "json",
    "json",
    "json",
    "JSON",
    "Json",
    "",
    "",
    "jsonc",
    "json5",
    "python",
    "javascript",
    "yaml",
]
THOUGHTS = [
    "The serve job is memory-bound, so 8-bit weights halve the bytes streamed per step.",
    "Training needs 16 bytes per parameter of Adam state; maybe {tp: 2} helps.",
    'Norms stay at "fp32" and the key is "jobs".',
    "Option {gpus: 4} is too many.",
    "Tensor parallelism must divide the heads.",
]
ENUM_FIELDS = ["embedding", "attention", "mlp", "norm", "lm_head"]


def _prose(rng: random.Random, quotes: bool = True) -> str:
    pool = WORDS + STRAY + (QUOTED if quotes else [])
    return " ".join(rng.choice(pool) for _ in range(rng.randint(0, 25)))


def _thought(rng: random.Random, plans: list[dict]) -> str:
    parts = [rng.choice(THOUGHTS) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.25:  # a decoy plan inside the reasoning
        parts.insert(rng.randint(0, len(parts)), json.dumps(rng.choice(plans)))
    return " ".join(parts)


def _copy(plan: dict) -> dict:
    return json.loads(json.dumps(plan))


def _perturbed(plan: dict, rng: random.Random) -> dict:
    """A still schema-valid variation: other numbers and formats, dropped optional fields, fewer jobs."""
    plan = _copy(plan)
    jobs = plan["jobs"]
    for job in jobs:
        if rng.random() < 0.4:
            job["precision"][rng.choice(ENUM_FIELDS)] = rng.choice(
                ["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
            )
        if rng.random() < 0.2:
            job["gpus"] = max(0, job["gpus"] + rng.choice((-1, 1)))
        if rng.random() < 0.1:
            job.pop(rng.choice(["micro_batch_size", "activation_checkpointing", "kv_cache"]), None)
        if rng.random() < 0.1:
            job["id"] = rng.choice(["a}b", 't{"q"}', "x\\y", "café", "模型", "🙂", "\u2028", "{", '"'])
    if rng.random() < 0.15 and len(jobs) > 1:  # a multi-agent answer: one job only
        plan["jobs"] = [rng.choice(jobs)]
    if rng.random() < 0.1:
        jobs.reverse()
    return plan


def _schema_error(plan: dict, rng: random.Random) -> object:
    """A plan that decodes as JSON but is not a valid ``Plan`` (or, last two, not plan-like)."""
    plan = _copy(plan)
    job = rng.choice(plan["jobs"]) if plan["jobs"] else {}
    kind = rng.randrange(16)
    if kind == 0:
        job["precision"][rng.choice(ENUM_FIELDS)] = rng.choice(["BF16", "FP8", "Int4", "bfloat16"])
    elif kind == 1:
        job["gpus"] = rng.choice(["2", 2.0, -1, 65, None, True])
    elif kind == 2:
        job["tensor_parallel"] = rng.choice([3, 0, "2", 16])
    elif kind == 3:
        job[rng.choice(["notes", "GPUs", "tp", "precision_map"])] = 1
    elif kind == 4:
        job.pop(rng.choice(["id", "gpus", "tensor_parallel", "precision"]), None)
    elif kind == 5:
        job.get("precision", {}).pop(rng.choice(ENUM_FIELDS), None)
    elif kind == 6:
        job["micro_batch_size"] = rng.choice([3, 0, 128, "8"])
    elif kind == 7:
        job["activation_checkpointing"] = rng.choice(["true", 1, None])
    elif kind == 8:
        job["kv_cache"] = rng.choice(["FP8", "int2", 8])
    elif kind == 9:
        job["id"] = rng.choice(["", "x" * 65, 7])
    elif kind == 10:
        plan["reasoning"] = "because"
    elif kind == 11:
        plan["jobs"] = plan["jobs"] * 17
    elif kind == 12:
        plan["jobs"] = {j["id"]: j for j in plan["jobs"]} if rng.random() < 0.5 else "all on one GPU"
    elif kind == 13:
        plan = [plan] if rng.random() < 0.5 else plan["jobs"]
    elif kind == 14:
        plan = {rng.choice(["plan", "answer"]): plan}
    else:
        plan = {j["id"]: j["gpus"] for j in plan["jobs"]}
    return plan


def _layout(value: object, rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.35:
        return json.dumps(value, indent=2, ensure_ascii=rng.random() < 0.5)
    if roll < 0.65:
        return json.dumps(value)
    if roll < 0.9:
        return json.dumps(value, separators=(",", ":"))
    return json.dumps(value, indent=4, sort_keys=True)


def _broken(payload: str, rng: random.Random) -> str:
    """Text damage to a payload: truncation, spliced noise, trailing comma, Python repr, comments..."""
    kind = rng.randrange(10)
    if kind <= 2:
        return payload[: rng.randrange(0, len(payload) + 1)]
    if kind == 3:
        cut = rng.randrange(len(payload) + 1)
        return (
            payload[:cut] + "".join(rng.choice(MARKUP[:24]) for _ in range(rng.randint(1, 3))) + payload[cut:]
        )
    if kind == 4:
        index = payload.rfind("}", 0, max(1, len(payload) - 2))
        return payload[:index] + "," + payload[index:] if index > 0 else payload + ","
    if kind == 5:
        return payload.replace('"', "'")
    if kind == 6:
        return payload.replace("\n", " // note\n", 1) if "\n" in payload else "/* plan */ " + payload
    if kind == 7:
        return payload.replace('"jobs"', '"\\u006aobs"', 1)
    if kind == 8:
        depth = rng.randint(NESTING - 4, NESTING + 3)
        return '{"a":' * depth + payload + "}" * depth
    return payload.replace('"', '\\"', rng.randint(1, 3))


def _wrapped(payload: str, rng: random.Random, plans: list[dict]) -> str:
    """The answer text around a payload: bare, prose, fences of every kind, several plans."""
    kind = rng.randrange(14)
    before, after = _prose(rng), _prose(rng)
    tag = rng.choice(FENCE_TAGS)
    other = _layout(_perturbed(rng.choice(plans), rng), rng)
    if kind == 0:
        return payload
    if kind == 1:
        return f"{before}\n{payload}\n{after}"
    if kind in (2, 3, 4):
        return f"{before}\n```{tag}\n{payload}\n```\n{after}" if kind > 2 else f"```{tag}\n{payload}\n```"
    if kind == 5:
        return f"{before}\n```{tag}\n{payload}"  # unclosed fence
    if kind == 6:
        return f"```{tag}{payload}```{after}"  # no newlines
    if kind == 7:
        return f"```python\ndef f(x): return {{x: [x]}}\n```\n{before}\n```{tag}\n{payload}\n```"
    if kind == 8:
        return f"Option A:\n```{tag}\n{payload}\n```\nOption B:\n```{rng.choice(FENCE_TAGS)}\n{other}\n```"
    if kind == 9:
        return f"Draft: {other}\n{before}\n```{tag}\n{payload}\n```"
    if kind == 10:
        return f"{payload}\nAlternatively {after} {other}"
    if kind == 11:
        return f"`{payload}` {after}" if rng.random() < 0.5 else f"````{tag}\n{payload}\n````"
    if kind == 12:
        return f'```{tag}\n{{"note": "{after[:20]}"}}\n```\n{payload}'
    return f"{before} ```{tag}\n{payload}\n``` {after} ``` {_prose(rng)}"


def _with_reasoning(answer: str, rng: random.Random, plans: list[dict]) -> str:
    kind = rng.randrange(12)
    thought = _thought(rng, plans)
    if kind <= 4:
        return answer
    if kind <= 6:
        return f"<think>\n{thought}\n</think>\n{answer}"
    if kind == 7:
        return f"<think>{thought} {answer}"  # the answer never started
    if kind == 8:
        return f"{thought}\n</think>\n{answer}"  # the template opened the tag
    if kind == 9:
        return f"<think>{thought}</think> a < b <think>{_thought(rng, plans)}</think>{answer}"
    if kind == 10:
        return f"{answer}\n<think>{thought}" + ("</think> done" if rng.random() < 0.5 else "")
    return f"<THINK>{thought}</THINK>{answer}" if rng.random() < 0.5 else f"<think></think>{answer}</think>"


def _packaged(text: str, rng: random.Random) -> object:
    """As the trainer passes it: mostly a string, else a TRL message list (sometimes without an answer)."""
    kind = rng.randrange(20)
    if kind <= 13:
        return text
    if kind <= 15:
        return [{"role": "assistant", "content": text}]
    if kind == 16:
        cut = rng.randrange(len(text) + 1)
        parts = [{"type": "text", "text": text[:cut]}, {"type": "image", "url": "x.png"}, text[cut:]]
        return [{"role": "user", "content": "plan it"}, {"role": "assistant", "content": parts}]
    if kind == 17:
        return ({"role": "assistant", "content": P}, {"role": "assistant", "content": text})
    if kind == 18:
        return [{"role": "assistant", "content": text}, {"role": "user", "content": "thanks"}]
    return (
        [{"role": "user", "content": text}]
        if rng.random() < 0.5
        else [{"role": "assistant", "content": None}]
    )


def _realistic(rng: random.Random, plans: list[dict]) -> object:
    plan = rng.choice(plans)
    roll = rng.random()
    value = plan if roll < 0.25 else _perturbed(plan, rng) if roll < 0.7 else _schema_error(plan, rng)
    payload = _layout(value, rng)
    if rng.random() < 0.25:
        payload = _broken(payload, rng)
    text = _with_reasoning(_wrapped(payload, rng, plans), rng, plans)
    if rng.random() < 0.02:  # long reasoning, around the size bound
        text = f"<think>{'x ' * rng.randint(9_000, 11_000)}</think>{text}"
    return _packaged(text, rng)


def _stray_braces(rng: random.Random, plans: list[dict]) -> str:
    body = json.dumps(rng.choice(plans), indent=2 if rng.random() < 0.5 else None)
    before, after = _prose(rng), _prose(rng)
    return rng.choice(
        [
            f"{before}\n{body}\n{after}",
            f"{before}\n{body}",
            f"{before}\n```json\n{body}\n```\n{after}",
            f"<think>{after}</think>{before}\n```json\n{body}\n```",
            f"{before} {body} {before} {json.dumps({'jobs': rng.choice(plans)['jobs'][::-1]})} }}",
        ]
    )


def _soup(rng: random.Random, pieces: list[str], size: int) -> str:
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, size)))


def _random_text(rng: random.Random) -> str:
    alphabet = 'ab {}[]"\\:,<>/`\n\u00e9\u2028\U0001f642\ud800'
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
    return rng.choice(
        [text, "{" + text, f"```json\n{{{text}", f"<think>{text}</think>```json\n{{{text}}}\n```"]
    )


def _adversarial(rng: random.Random) -> str:
    """About MAX_CHARS characters of what makes scanners slow, maybe with a plan at the end."""
    unit = rng.choice(
        ["{", "{ ", '{"', "{a}", "{}", "[", "[{", '{"\\"{', "{a{a", '{x "{" } ', "x {", '"', '{"a":']
    )
    tail = rng.choice(["", P, f"```json\n{P}\n```", P[:100]])
    return unit * ((MAX_CHARS - len(tail)) // len(unit) - rng.randint(0, 3)) + tail


def completions(plans: list[dict]) -> Iterator[object]:
    """The corpus, in a fixed order: every family from one ``Random(SEED)``."""
    rng = random.Random(SEED)
    yield from EDGE_CASES
    for shape in TRUNCATION_SHAPES:
        for cut in range(len(P) + 1):
            yield shape.format(P[:cut])
    for _ in range(6_000):
        yield _realistic(rng, plans)
    for _ in range(500):
        yield _stray_braces(rng, plans)
    for _ in range(1_000):
        yield _soup(rng, MARKUP, 25)
    for _ in range(700):
        yield _soup(rng, list(BRACKET_CHARS), 60)
    for _ in range(700):
        yield _soup(rng, BRACKET_TOKENS, 80)
    for _ in range(300):
        cut, splice = rng.randrange(len(P) + 1), rng.randrange(len(P) + 1)
        noise = _soup(rng, MARKUP, 3)
        yield rng.choice([P[:cut], f"```json\n{P[:cut]}", P[:splice] + noise + P[splice:]])
        yield f"text\n```json\n{P[:splice] + noise + P[splice:]}\n```"
    for _ in range(300):
        yield _random_text(rng)
    for _ in range(40):
        yield _adversarial(rng)


def base_plans() -> list[dict]:
    """Plans of four baselines on scenarios of each tier (what the golden file stores as its inputs)."""
    from fleet_rl import make_scenario
    from fleet_rl.baselines import BASELINES

    return [
        BASELINES[name](make_scenario(task, seed), seed)
        for task in ("easy", "medium", "hard")
        for seed in range(3)
        for name in ("even_bf16", "random", "random_split", "optimal")  # fixed: the corpus stays as recorded
    ]


def digest(value: object, size: int) -> str:
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
    elif isinstance(value, bytes):
        data = value
    else:
        data = repr(value).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:size]


def outcome(completion: object, result) -> list:
    """A golden line: [completion hash, error, num_candidates, plan hash or None, detail]."""
    plan = None if result.plan is None else digest(msgspec.json.encode(result.plan), 16)
    return [digest(completion, 8), result.error, result.num_candidates, plan, result.detail]


def read_golden() -> tuple[list[dict], list[list]]:
    """(the base plans, the recorded outcomes)."""
    header, outcomes = read_lines(GOLDEN)
    return header["plans"], outcomes


def write_golden() -> int:
    from rewards.parsing import parse_plan

    plans = base_plans()
    outcomes = [outcome(completion, parse_plan(completion)) for completion in completions(plans)]
    return write_lines(GOLDEN, {"seed": SEED, "plans": plans}, outcomes)


if __name__ == "__main__":
    command_line(__doc__, write_golden, GOLDEN, "parser")

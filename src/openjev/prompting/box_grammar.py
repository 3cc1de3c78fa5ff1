"""The grammar of a box answer: the model's own grounding format with only the digits free.

The question turn ends with the frame's opening, `{"bbox_2d": [` (the cue), so what is generated is

    N, N, N, N]}        N = an integer from 0 to the cap, no leading zero

in the model's tokens: one token per digit (Qwen's vocabulary), the separator `,` + ` ` as the
tokenizer writes ", ", and the close `]}`. The cap fits the model's grounding scale
(`VisionSpec.largest_coordinate`): 1000 for relative coordinates (N = 0 | [1-9][0-9]{0,2} | 1000), all
numbers of as many digits as the longest resized side for pixels. SGLang's grammar backend
(xgrammar in 0.5.19) then allows only the model's end-of-sequence ids, and the request finishes on
one of them (`schedule_batch.py` `check_finished`, `grammar.is_terminated`): `parse` accepts one
trailing stop id. `regex` is that language for SGLang's `regex` sampling
constraint (0.5.19 applies its grammar mask to the logits before the sampler's log-softmax, so the
logprobs returned are over the allowed tokens); `allowed_after(ids)` is the same language as a
token mask, for a backend that masks logits itself. `parse(ids)` reads the four numbers' digit
positions back from what was generated. A constraint is built once per tokenizer and checked there:
each digit, the separator and the close must tokenize as described, else the model cannot be asked
box questions in this format.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from openjev.prompting.tokenizer import ChatTokenizer

CUE = '{"bbox_2d": ['
#: The cap of relative coordinates (Qwen3-VL's 0-1000).
RELATIVE_CAP = 1000


def number_regex(cap: int) -> str:
    """The integers 0..cap without leading zeros, for a cap that is a power of ten or all nines."""
    places = len(str(cap))
    if cap == 10 ** (places - 1):
        return f"(0|[1-9][0-9]{{0,{places - 2}}}|{cap})"
    if cap == 10**places - 1:
        return f"(0|[1-9][0-9]{{0,{places - 1}}})"
    raise ValueError(f"a box number cap is a power of ten or all nines, not {cap}")


def cap_for(largest: int) -> int:
    """The grammar's cap for coordinates up to `largest`: itself if a power of ten, else all the
    numbers of its digit count."""
    places = len(str(largest))
    return largest if largest == 10 ** (places - 1) else 10**places - 1


class BoxFormatError(ValueError):
    """The tokenizer does not write the box format one digit a token."""


@dataclass(frozen=True, slots=True)
class BoxGrammar:
    digit_ids: tuple[int, ...]
    separator_ids: tuple[int, ...]
    close_ids: tuple[int, ...]
    #: The largest number the grammar allows (`cap_for`).
    cap: int = RELATIVE_CAP

    @classmethod
    def of(cls, chat: ChatTokenizer, largest: int = RELATIVE_CAP) -> BoxGrammar:
        """The grammar for coordinates up to `largest` (`VisionSpec.largest_coordinate`)."""
        digits = [chat.encode(str(digit)) for digit in range(10)]
        if any(len(ids) != 1 for ids in digits):
            raise BoxFormatError("a digit is not one token")
        ids = tuple(ids[0] for ids in digits)
        grammar = cls(ids, tuple(chat.encode(", ")), tuple(chat.encode("]}")), cap_for(largest))
        sample = "1000, 7, 45, 123]}"
        if chat.encode(sample) != grammar._ids_of(sample):
            raise BoxFormatError(f"{sample!r} does not tokenize as digits, separators and the close")
        return grammar

    @property
    def regex(self) -> str:
        number = number_regex(self.cap)
        return rf"{number}, {number}, {number}, {number}\]\}}"

    @property
    def max_tokens(self) -> int:
        """Ids a box answer takes at most: four numbers of the cap's digits, three separators, the close
        and one trailing stop id."""
        return 4 * len(str(self.cap)) + 3 * len(self.separator_ids) + len(self.close_ids) + 1

    def _ids_of(self, text: str) -> list[int]:
        numbers = text.removesuffix("]}").split(", ")
        ids: list[int] = []
        for index, number in enumerate(numbers):
            ids += [self.digit_ids[int(digit)] for digit in number]
            ids += self.separator_ids if index < len(numbers) - 1 else self.close_ids
        return ids

    @property
    def read_ids(self) -> tuple[int, ...]:
        """The ids whose logprobs are read at every generated position: the digits."""
        return self.digit_ids

    def allowed_after(self, generated: Sequence[int]) -> tuple[int, ...]:
        """The ids the grammar allows next after `generated` (a valid prefix); () once it is complete."""
        numbers, current, pending = 0, "", ()
        for token in generated:
            if pending:
                pending = pending[1:]
            elif token in self.digit_ids:
                current += str(self.digit_ids.index(token))
            else:  # the first id of a separator or of the close
                numbers, current = numbers + 1, ""
                ends = self.separator_ids if numbers < 4 else self.close_ids
                pending = ends[1:]
            if numbers == 4 and not pending:
                return ()
        if pending:
            return (pending[0],)
        digits = [digit for digit in range(10) if _number_prefix(current + str(digit), self.cap)]
        allowed = [self.digit_ids[digit] for digit in digits]
        if current:
            allowed.append((self.separator_ids if numbers < 3 else self.close_ids)[0])
        return tuple(allowed)

    def parse(self, generated: Sequence[int], stops: Sequence[int] = ()) -> list[list[int]]:
        """Per number, the positions (into `generated`) of its digits; a ValueError unless `generated`
        is a whole box answer, followed by at most one of `stops` (module doc)."""
        numbers: list[list[int]] = [[]]
        position = 0
        while position < len(generated):
            token = generated[position]
            if token in self.digit_ids:
                numbers[-1].append(position)
                position += 1
                continue
            ends = self.separator_ids if len(numbers) < 4 else self.close_ids
            if tuple(generated[position : position + len(ends)]) != ends or not numbers[-1]:
                raise ValueError(f"the generation is not a box answer at position {position}")
            position += len(ends)
            if len(numbers) == 4:
                rest = generated[position:]
                if len(rest) > 1 or (rest and rest[0] not in stops):
                    raise ValueError("the generation goes on after the box")
                return numbers
            numbers.append([])
        raise ValueError("the generation ended before the box was complete")

    def digits(self, generated: Sequence[int], positions: Sequence[int]) -> tuple[int, ...]:
        return tuple(self.digit_ids.index(generated[position]) for position in positions)


def _number_prefix(text: str, cap: int) -> bool:
    """Whether `text` begins (or is) a number of the grammar: no leading zero, at most `cap`."""
    if len(text) > 1 and text[0] == "0":
        return False
    return int(text) <= cap

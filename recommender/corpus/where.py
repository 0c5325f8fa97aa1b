"""`--where` conditions on records as they are read: `category=cs.LG`, `year>=2020`, `venue=*ICML*`.

Conditions are ANDed; within one, comma-separated values are ORed; values are
matched ignoring case, with shell wildcards (`category=cs.*`).
"""

from __future__ import annotations

import fnmatch
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import OptionError

FIELDS = ("category", "year", "venue")
_CONDITION = re.compile(r"^\s*([A-Za-z_-]+)\s*(>=|<=|!=|=|>|<)\s*(.*?)\s*$")
_COMPARE = {
    "=": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
USAGE = "use FIELD=VALUE with FIELD one of category, year, venue (e.g. category=cs.LG, year>=2020)"


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    values: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.field}{self.op}{','.join(self.values)}"

    def matches(self, record) -> bool:
        """Whether a record as read (fields and categories) or a stored `Paper` meets the
        condition."""
        fields = (
            record.fields
            if hasattr(record, "fields")
            else {"year": record.year, "venue": record.venue}
        )
        if self.field == "year":
            year = _year(fields.get("year"))
            if year is None:
                return False
            return any(_COMPARE[self.op](year, int(value)) for value in self.values)
        if self.field == "category":
            have = [category.casefold() for category in record.categories]
        else:
            venue = fields.get("venue")
            have = [venue.casefold()] if isinstance(venue, str) else []
        found = any(
            fnmatch.fnmatchcase(item, value.casefold()) for item in have for value in self.values
        )
        return found if self.op == "=" else not found


@dataclass(frozen=True)
class Where:
    conditions: tuple[Condition, ...]

    def __str__(self) -> str:
        return " ".join(str(condition) for condition in self.conditions)

    def matches(self, record) -> bool:
        return all(condition.matches(record) for condition in self.conditions)

    def fields_present(self, record) -> set[str]:
        """The fields of these conditions that a record (or stored `Paper`) has a value for."""
        fields = (
            record.fields
            if hasattr(record, "fields")
            else {"year": record.year, "venue": record.venue}
        )
        present = {"category"} if record.categories else set()
        if _year(fields.get("year")) is not None:
            present.add("year")
        if isinstance(fields.get("venue"), str) and fields["venue"].strip():
            present.add("venue")
        return present & {condition.field for condition in self.conditions}

    def fields_present_all(self) -> set[str]:
        """Every field these conditions name."""
        return {condition.field for condition in self.conditions}

    def no_match_reason(self, present: set[str], read: int) -> str:
        """Why nothing matched, in words: the fields none of the `read` papers has (`present`: the
        fields some had), else that the values match none."""
        missing = [
            condition.field for condition in self.conditions if condition.field not in present
        ]
        if missing:
            names = " or ".join(dict.fromkeys(missing))
            return (
                f"none of the {read} papers has a {names}: drop that condition or add the field to"
                " the input"
            )
        return "loosen the condition"


def parse_where(conditions: Sequence[str]) -> Where | None:
    """`["category=cs.LG,cs.CL", "year>=2020"]` as a Where (None when there are none)."""
    parsed = []
    for text in conditions:
        found = _CONDITION.match(text)
        if not found or not found.group(3):
            raise OptionError(f"condition '{text}' cannot be read: {USAGE}", "where")
        name, op, value = found.group(1).lower(), found.group(2), found.group(3)
        if name in ("categories", "cat"):
            name = "category"
        if name not in FIELDS:
            raise OptionError(f"condition '{text}': unknown field '{name}': {USAGE}", "where")
        values = tuple(part.strip() for part in value.split(",") if part.strip())
        if name == "year":
            if not all(re.fullmatch(r"\d{1,4}", v) for v in values):
                raise OptionError(
                    f"condition '{text}': a year is a whole number, e.g. year>=2020", "where"
                )
        elif op not in ("=", "!="):
            raise OptionError(
                f"condition '{text}': {name} takes = or != (wildcards allowed: {name}=cs.*)",
                "where",
            )
        parsed.append(Condition(name, op, values))
    return Where(tuple(parsed)) if parsed else None


def _year(value) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None

# tier: nano
# reason: nano: imports only __future__, dataclasses, typing, enum (all in nano)
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Optional
import enum

class Status(enum.Enum):
    OPEN = 1
    DONE = 2

@dataclass
class Task:
    title: str
    status: Status = Status.OPEN
    tags: list[str] = field(default_factory=list)
    parent: Optional[Task] = None

t = Task("write router", tags=["go"])
print(t)

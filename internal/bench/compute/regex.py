# Regular expressions over ~1 MB of text.
import re

words = ["alpha", "beta", "gamma", "delta", "user@example.com", "2024-05-17", "x1y2z3", "Lorem", "ipsum"]
text = " ".join(words[(i * 7) % len(words)] for i in range(130_000))
emails = re.findall(r"[\w.]+@[\w.]+\.\w+", text)
dates = re.findall(r"\b(\d{4})-(\d{2})-(\d{2})\b", text)
caps = len(re.findall(r"\b[A-Z][a-z]+\b", text))
replaced = re.sub(r"a(l|m)", r"A\1", text)
print(len(text), len(emails), len(dates), caps, len(replaced))

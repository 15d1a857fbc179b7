# tier: nano
# reason: nano: imports only re, collections, string (all in nano)
import re
from collections import Counter
import string

text = """It was the best of times, it was the worst of times."""
words = re.findall(r"[a-z']+", text.lower())
counts = Counter(w.strip(string.punctuation) for w in words)
for word, n in counts.most_common(5):
    print(f"{word:>10} {n}")

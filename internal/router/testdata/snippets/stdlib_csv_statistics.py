# tier: nano
# reason: nano: imports only csv, io, statistics (all in nano)
import csv, io, statistics

raw = "name,score\nada,91\nbob,78\ncy,85\n"
rows = list(csv.DictReader(io.StringIO(raw)))
scores = [int(r["score"]) for r in rows]
print("mean", statistics.mean(scores), "stdev", round(statistics.stdev(scores), 2))

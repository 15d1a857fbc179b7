# tier: heavy
# reason: heavy: imports scipy (not in nano; in image python-datascience)
try:
    from scipy import stats
except ImportError as exc:
    raise RuntimeError("scipy is required for the t-test") from exc

print(stats.ttest_ind([1, 2, 3], [2, 3, 4]))

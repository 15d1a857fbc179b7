# tier: heavy
# reason: heavy: imports multiprocessing (not in nano; in image python-datascience)
from multiprocessing import Pool

def square(x):
    return x * x

if __name__ == "__main__":
    with Pool(2) as p:
        print(p.map(square, range(5)))

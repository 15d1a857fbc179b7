# tier: nano
# reason: nano: imports only sys, tomllib (all in nano)
import sys
if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

print(tomllib.loads('a = 1'))

# tier: nano
# reason: nano: no imports
snippet = 'importlib.import_module("numpy")'
other = "__import__('pandas')"
print(snippet, other)

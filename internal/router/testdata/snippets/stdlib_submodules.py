# tier: nano
# reason: nano: imports only xml, os, urllib, concurrent (all in nano)
import xml.etree.ElementTree as ET
import os.path
from urllib.parse import urlparse, parse_qs
from concurrent.futures import Future

root = ET.fromstring("<a><b x='1'/><b x='2'/></a>")
print([b.get("x") for b in root.iter("b")])
print(os.path.join("a", "b"), parse_qs(urlparse("http://h/p?q=1").query))
f = Future()
f.set_result(abs(-1))
print(f.result())

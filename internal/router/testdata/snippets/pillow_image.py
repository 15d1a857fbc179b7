# tier: heavy
# reason: heavy: imports PIL (not in nano; in image python-datascience)
from PIL import Image, ImageDraw

img = Image.new("RGB", (64, 64), "white")
ImageDraw.Draw(img).ellipse((8, 8, 56, 56), outline="red")
img.save("circle.png")

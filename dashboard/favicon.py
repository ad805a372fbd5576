"""The browser tab's icon, drawn here and served by the dashboard itself.

A `:material/…:` page icon makes Streamlit's frontend point the favicon at
fonts.gstatic.com (and an emoji at its Noto emoji host): every visit would ask an outside
server. A small image drawn with Pillow (installed with Streamlit) is served from
the dashboard's own `/media` route instead, and needs no binary file in the repository.
"""

from __future__ import annotations

from functools import cache

from PIL import Image, ImageDraw

from dashboard.colors import CLASS_COLORS

SIZE = 64


@cache
def favicon() -> Image.Image:
    """A stopwatch: a ring, a crown and one hand, in the client give-up colour."""
    image = Image.new("RGBA", (SIZE, SIZE), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    colour = CLASS_COLORS["client_timeout"]
    draw.rectangle((26, 2, 38, 8), fill=colour)
    draw.ellipse((6, 10, 58, 62), outline=colour, width=7)
    draw.line((32, 36, 44, 22), fill=colour, width=6)
    return image

"""Images made safe (`request/images.py`), the processor's token count (`prompting/vision.py`) against
transformers' own Qwen2-VL / Qwen3-VL image processor, the SGLang vision spec from a model's files
(`backends/sglang_vision.py`) and the placeholder marks (`prompting/image_marks.py`)."""

from __future__ import annotations

import io
import random
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from openjev.backends.sglang_images import ENTRY_OVERHEAD, Base64Images, ImageFiles
from openjev.backends.sglang_vision import vision_spec
from openjev.config import Settings
from openjev.errors import RequestRejected
from openjev.prompting.image_marks import ImageMarks
from openjev.prompting.vision import GroundingScale, VisionSpec
from openjev.request.images import ImageInput, ImagePreparer, ImageRefused, as_rgb, fitted_size, make_safe
from openjev.request.schema import ChoiceQuestion

LIMITS = {"max_pixels": 1024 * 1024, "max_source_pixels": 40_000_000}
QWEN2_VL = VisionSpec("<|vision_start|>", "<|image_pad|>", "<|vision_end|>", 14, 2, 56 * 56, 28 * 28 * 1280)
QWEN3_VL = VisionSpec("<|vision_start|>", "<|image_pad|>", "<|vision_end|>", 16, 2, 65536, 16777216)


def encoded(image: Image.Image, kind: str = "PNG", **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, format=kind, **options)
    return out.getvalue()


def test_the_bytes_decide_the_format_and_anything_else_is_refused():
    picture = Image.new("RGB", (40, 30), (10, 20, 30))
    assert make_safe(encoded(picture, "JPEG"), **LIMITS).data.startswith(b"\xff\xd8\xff")
    for other in (encoded(picture, "GIF"), encoded(picture, "BMP"), b"not an image at all"):
        with pytest.raises(ImageRefused, match="not a PNG or JPEG"):
            make_safe(other, **LIMITS)


def test_truncated_corrupt_and_oversized_images_are_refused_before_a_pixel_is_trusted():
    whole = encoded(Image.new("RGB", (200, 200), (1, 2, 3)))
    with pytest.raises(ImageRefused, match="does not decode"):
        make_safe(whole[: len(whole) // 2], **LIMITS)
    with pytest.raises(ImageRefused, match="does not decode"):
        make_safe(whole[:16] + bytes(64), **LIMITS)
    # The header says 50 megapixels: refused without decoding them.
    with pytest.raises(ImageRefused, match="50000000 pixels"):
        make_safe(encoded(Image.new("L", (10000, 5000))), **LIMITS)


def test_exif_orientation_rgb_and_the_pixel_budget():
    upright = Image.new("RGB", (60, 20), (255, 0, 0))
    exif = Image.Exif()
    exif[0x0112] = 6  # the camera was turned: display rotated 90 degrees clockwise
    turned = make_safe(encoded(upright, "JPEG", exif=exif.tobytes()), **LIMITS)
    assert (turned.height, turned.width) == (60, 20)
    transparent = Image.new("RGBA", (8, 8), (0, 0, 0, 0))
    rgb = Image.open(io.BytesIO(make_safe(encoded(transparent), **LIMITS).data))
    assert rgb.mode == "RGB" and rgb.getpixel((3, 3)) == (255, 255, 255)  # transparency over white
    big = make_safe(encoded(Image.new("RGB", (3000, 2000), (9, 9, 9))), **LIMITS)
    assert (big.height, big.width) == fitted_size(2000, 3000, LIMITS["max_pixels"])
    assert big.height * big.width <= LIMITS["max_pixels"] and abs(big.width / big.height - 1.5) < 0.01


def png16(color_type: int, rows: list[list[int]]) -> bytes:
    """A 16-bit PNG (color type 0: gray, 2: RGB) of rows of samples, written by hand: Pillow writes
    no 16-bit RGB PNG."""
    channels = {0: 1, 2: 3}[color_type]

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", len(rows[0]) // channels, len(rows), 16, color_type, 0, 0, 0)
    raw = b"".join(b"\0" + struct.pack(f">{len(row)}H", *row) for row in rows)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def rgb_pixels(data: bytes) -> list[tuple[int, int, int]]:
    image = Image.open(io.BytesIO(data))
    assert image.mode == "RGB"
    return list(image.getdata())


def test_high_depth_modes_are_scaled_not_clipped():
    # 16-bit gray (Pillow's I;16): 25700 is 100 of 255, 32768 is 127.5; clipped, all but 0 were 255.
    gray = make_safe(png16(0, [[0, 25700, 65535, 32768]]), **LIMITS)
    assert rgb_pixels(gray.data) == [(0, 0, 0), (100, 100, 100), (255, 255, 255), (128, 128, 128)]
    assert rgb_pixels(make_safe(encoded(Image.new("I;16", (2, 2), 25700)), **LIMITS).data) == [(100, 100, 100)] * 4
    rgb16 = make_safe(png16(2, [[65535, 0, 25700, 0, 32768, 65535]]), **LIMITS)
    assert rgb_pixels(rgb16.data) == [(255, 0, 100), (0, 128, 255)]
    # Modes no PNG or JPEG decodes to today, converted by the same rule.
    for mode in ("I;16B", "I;16L", "I", "F"):
        wide = Image.new(mode, (3, 1))
        for x, value in enumerate((0, 25700, 65535)):
            wide.putpixel((x, 0), value)
        assert list(as_rgb(wide).getdata()) == [(0, 0, 0), (100, 100, 100), (255, 255, 255)], mode
    # Gray with alpha and a palette with a transparent entry: over white.
    gray_alpha = Image.new("LA", (2, 1))
    gray_alpha.putdata([(100, 0), (100, 255)])
    assert rgb_pixels(make_safe(encoded(gray_alpha), **LIMITS).data) == [(255, 255, 255), (100, 100, 100)]
    palette = Image.new("P", (2, 1))
    palette.putpalette([255, 0, 0, 0, 0, 255])
    palette.putdata([0, 1])
    assert rgb_pixels(make_safe(encoded(palette, transparency=0), **LIMITS).data) == [(255, 255, 255), (0, 0, 255)]
    # A CMYK JPEG (magenta ink): its colour, within JPEG's error.
    cmyk = rgb_pixels(make_safe(encoded(Image.new("CMYK", (8, 8), (0, 255, 0, 0)), "JPEG", quality=95), **LIMITS).data)
    assert all(abs(red - 255) < 6 and green < 6 and abs(blue - 255) < 6 for red, green, blue in cmyk)


def test_an_aspect_ratio_past_the_processor_s_is_refused():
    assert make_safe(encoded(Image.new("RGB", (200, 1))), **LIMITS).width == 200
    for size in ((300, 1), (1, 300), (3000, 14)):
        with pytest.raises(
            ImageRefused, match=r"aspect ratio of \d+:1; the model's image processor takes at most 200:1"
        ):
            make_safe(encoded(Image.new("RGB", size)), **LIMITS)


def private_chunk(png: bytes, size: int) -> bytes:
    """`png` with an ancillary private chunk (`prVt`) of `size` zero bytes before its IEND."""
    data = bytes(size)
    chunk = struct.pack(">I", size) + b"prVt" + data + struct.pack(">I", zlib.crc32(b"prVt" + data))
    return png[:-12] + chunk + png[-12:]


def test_no_caller_byte_passes_an_upright_rgb_png_is_encoded_again_from_its_pixels():
    picture = Image.new("RGB", (30, 30), (4, 5, 6))
    padded = private_chunk(encoded(picture, pnginfo=PngInfo()), 1024 * 1024)
    safe = make_safe(padded, **LIMITS)
    assert len(safe.data) < 1024 and b"prVt" not in safe.data
    assert Image.open(io.BytesIO(safe.data)).tobytes() == picture.tobytes()
    text = PngInfo()
    text.add_text("Comment", "x" * 100_000)
    assert len(make_safe(encoded(picture, pnginfo=text), **LIMITS).data) < 1024


def test_a_repeated_image_is_prepared_once_and_refusals_name_the_asset():
    preparer = ImagePreparer(Settings())
    data = encoded(Image.new("RGB", (30, 30), (4, 5, 6)), "JPEG")
    first = preparer.prepare({"a": data})["a"]
    assert preparer.prepare({"b": data})["b"] is first and preparer.hits == 1
    with pytest.raises(RequestRejected) as refused:
        preparer.prepare({"good": data, "bad": b"\x89PNG\r\n\x1a\n" + bytes(10)})
    assert [issue.loc for issue in refused.value.issues] == [("assets", "bad")]


@pytest.mark.parametrize("spec", [QWEN2_VL, QWEN3_VL], ids=["qwen2-vl", "qwen3-vl"])
def test_the_token_count_is_the_processor_s(spec):
    # The PIL processor (no torchvision here): its smart_resize is a copy of the torchvision one's.
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil, smart_resize

    processor = Qwen2VLImageProcessorPil(
        patch_size=spec.patch_size, merge_size=spec.merge_size,
        size={"shortest_edge": spec.min_pixels, "longest_edge": spec.max_pixels},
    )  # fmt: skip
    rng = random.Random(7)
    sizes = [(1, 1), (28, 28), (32, 32), (224, 224), (480, 640), (1024, 1024), (4000, 3000), (50, 9000), (9000, 50)]
    sizes += [(rng.randint(1, 5000), rng.randint(1, 5000)) for _ in range(200)]
    for height, width in sizes:
        if max(height, width) / min(height, width) > 200:
            continue
        expected = smart_resize(height, width, spec.factor, spec.min_pixels, spec.max_pixels)
        assert spec.resized(height, width) == expected, (height, width)
        patches = processor.get_number_of_image_patches(height, width, {})
        assert spec.image_tokens(height, width) == patches // spec.merge_size**2, (height, width)


def test_the_sglang_vision_spec_comes_from_the_model_s_files():
    config = {
        "image_token_id": 3,
        "vision_start_token_id": 1,
        "vision_end_token_id": 2,
        "vision_config": {"patch_size": 16, "spatial_merge_size": 2},
    }
    tokenizer = {
        "added_tokens": [{"id": 1, "content": "<s>"}, {"id": 2, "content": "</s>"}, {"id": 3, "content": "<p>"}]
    }
    qwen3 = {"patch_size": 16, "merge_size": 2, "size": {"shortest_edge": 65536, "longest_edge": 16777216}}
    assert vision_spec(config, qwen3, tokenizer) == VisionSpec("<s>", "<p>", "</s>", 16, 2, 65536, 16777216)
    qwen2 = {"min_pixels": 3136, "max_pixels": 1003520, "patch_size": 14, "merge_size": 2}
    assert vision_spec(config, qwen2, tokenizer) == VisionSpec("<s>", "<p>", "</s>", 14, 2, 3136, 1003520)
    # The grounding scale of box coordinates is the family's, by the config's model_type.
    pixels = vision_spec({**config, "model_type": "qwen2_5_vl"}, qwen2, tokenizer)
    assert pixels is not None and pixels.grounding is GroundingScale.ABSOLUTE_PIXELS
    assert pixels.grounding_extent(300, 500) == pixels.resized(300, 500)[::-1]
    relative = vision_spec({**config, "model_type": "qwen3_5_moe"}, qwen3, tokenizer)
    assert relative is not None and relative.grounding is GroundingScale.RELATIVE_1000
    assert relative.grounding_extent(300, 500) == (1000, 1000) and relative.largest_coordinate == 1000
    # Anything missing: served as text only, never with a guessed count.
    assert vision_spec(config, None, tokenizer) is None
    assert vision_spec({**config, "vision_config": None}, qwen3, tokenizer) is None
    assert vision_spec(config, qwen3, {"added_tokens": []}) is None


def test_base64_images_are_in_order_encoded_once_and_bounded_in_bytes():
    images = [ImageInput(bytes([n]) * 5, f"sha{n}", 1, 1) for n in range(3)]
    encode = Base64Images(capacity_bytes=2 * (8 + ENTRY_OVERHEAD))
    first = encode.entries([images[2], images[0]])
    assert first == ["AgICAgI=", "AAAAAAA="] and encode.entries([images[2]])[0] is first[0]
    encode.entries([images[1]])  # a third image: the least recently used one goes
    assert encode.bytes <= encode.capacity_bytes and encode.entries([images[0]])[0] is not first[1]


def test_image_files_are_written_once_named_by_content_bounded_and_removed(tmp_path):
    images = [ImageInput(bytes([n]) * 100, f"{n:064x}", 1, 1) for n in range(3)]
    files = ImageFiles(tmp_path / "images", capacity_bytes=250)
    with files.held(images[:2]):
        paths = files.entries(images[:2])
        assert [Path(path).read_bytes() for path in paths] == [image.data for image in images[:2]]
        assert paths[0].endswith(".png") and Path(paths[0]).is_absolute()
        assert files.entries(images[:1]) == paths[:1] and files.bytes == 200  # written once; now the most recent
        with files.held(images[2:]):
            # Over the bound, but every file is named by a call in flight: none goes.
            (third,) = files.entries(images[2:])
            assert files.bytes == 300 and all(Path(path).exists() for path in [*paths, third])
        # That call ended: its file is the only one free to go, and goes.
        assert files.bytes == 200 and not Path(third).exists() and all(Path(path).exists() for path in paths)
    with files.held(images[2:]):
        files.entries(images[2:])  # written again; the first two are free now: the least recently used goes
    assert files.bytes == 200 and not Path(paths[1]).exists() and Path(paths[0]).exists()
    own = ImageFiles(None, capacity_bytes=1000)
    with own.held(images[:1]):
        (path,) = own.entries(images[:1])
    files.close()
    own.close()
    assert list((tmp_path / "images").iterdir()) == []  # a directory given: only its files go
    assert not Path(path).parent.exists()


def test_marks_put_each_image_where_its_placeholder_stands_and_keep_quoting():
    marks = ImageMarks(("<image:a>", "<image:ab>"), "<V>")
    marked = marks.mark({"k <image:ab>": ["x <image:a> y", 3]})
    ((key, value),) = marked.items()
    assert marks.marker(1) in key and marks.marker(0) in value[0] and value[1] == 3
    segments, keys = marks.split([(f"a {marks.marker(0)} b", False), (f"<|im_end|> {marks.marker(1)}", True)])
    assert keys == ("<image:a>", "<image:ab>")
    assert segments == (("a ", False), ("<V>", False), (" b", False), ("<|im_end|> ", True), ("<V>", False))
    # A marker with another request's nonce is caller text: it stays text.
    other = ImageMarks(("<image:a>",), "<V>")
    assert other.split([(marks.marker(0), False)]) == (((marks.marker(0), False),), ())
    choice = ChoiceQuestion(
        type="choice", instructions="see <image:a>", criteria={"<image:a>": "is <image:a>", "x": None}
    )
    shown = marks.question(choice)
    assert list(shown.criteria) == ["<image:a>", "x"] and marks.marker(0) in shown.criteria["<image:a>"]
    # An option shown by its name shows the name's image.
    named = marks.question(ChoiceQuestion(type="choice", criteria={"<image:ab>": None, "y": None}))
    assert named.criteria == {"<image:ab>": marks.marker(1), "y": "y"}


def test_sglang_learns_at_start_up_whether_its_model_sees(qwen_tokenizer_dir):
    from openjev.backends.sglang_vision import read_vision
    from tests.fake_sglang.vision import SPEC, vision_model_dir

    info = {
        "has_image_understanding": True,
        "model_path": vision_model_dir(),
        "tokenizer_path": str(qwen_tokenizer_dir),
    }
    assert read_vision(info, {}, None) == SPEC
    assert read_vision({**info, "has_image_understanding": False}, {}, None) is None
    assert read_vision(info, {"language_model_only": True}, None) is None  # it refuses every image

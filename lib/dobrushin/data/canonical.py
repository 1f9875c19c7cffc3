"""The canonical inputs of the vision and language chapters, and their checked download.

The 100 ImageNet sample photos of ``EliSchwartz/imagenet-sample-images`` and GLUE's SST-2 ``dev.tsv`` (872
sentences) are read in place from ``$DOBRUSHIN_DATA`` (``imagenet_samples/``, ``sst2/dev.tsv``) when it is
set, else downloaded once into ``cache_dir()/data/``.  Every file is checked against the SHA-256 recorded
here, and the source line does not depend on the route (one cache key).  A missing or different file is
``DataUnavailable`` naming it, never a silent substitute.
"""
from __future__ import annotations

import io
import urllib.request
import zipfile
from pathlib import Path
from typing import Dict

from ..store.paths import cache_dir, data_dir
from ..store.results import atomic_write_bytes, sha256_bytes, sha256_file
from .availability import DataUnavailable

#: the file suffixes read as images (the photo folders of :mod:`dobrushin.data.inputs` too)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")

#: seconds before a download gives up (a connection that hangs fails the download, it does not hang the build)
DOWNLOAD_TIMEOUT_S = 20

IMAGENET_SAMPLES_REPO = "EliSchwartz/imagenet-sample-images"
IMAGENET_SAMPLES_COMMIT = "bc69043e2862758a1906c6a24a792bb28c6bb2ff"
#: where each photo is downloaded from (``{file}``: its name)
IMAGENET_SAMPLES_URL = f"https://raw.githubusercontent.com/{IMAGENET_SAMPLES_REPO}/{IMAGENET_SAMPLES_COMMIT}/{{file}}"
#: the source line of the canonical photos (part of every cache key that measured them)
IMAGENET_SAMPLES_SOURCE = (f"the 100 ImageNet sample photos of github.com/{IMAGENET_SAMPLES_REPO} (commit "
                           f"{IMAGENET_SAMPLES_COMMIT[:7]}: one photo of every tenth ILSVRC-2012 class), "
                           "each checked against its SHA-256")
#: SHA-256 of each canonical photo, by file name (the names are the repository's: ``<wnid>_<label>.JPEG``)
IMAGENET_SAMPLES_SHA256: Dict[str, str] = {
    "n01440764_tench.JPEG": "98f7e89b26142f7bdb61f3a627dee89729b0bb07a29e9e7f3be9d394c00c6f01",
    "n01530575_brambling.JPEG": "09570f8760a6bde05eb52ea544213b83f9167f95cf2a05d7a8df8b1a6b276344",
    "n01601694_water_ouzel.JPEG": "fd4af7913f83e7f706bcb75777a7bbeb8fbdbb8d3c795d26d390198bc4655261",
    "n01641577_bullfrog.JPEG": "0f7055de76565e6f08ae8050b9ef56a7de6e65846e6aa67c47859134db40a72b",
    "n01682714_American_chameleon.JPEG": "aa1d7d78d8d0d109e0b4aa6ac264409fa8411013cfec46c95ed263982691446e",
    "n01698640_American_alligator.JPEG": "714cee814bae6b054ed4c9a16f3949049f9616d940350006e7630ba2479af875",
    "n01740131_night_snake.JPEG": "cc7bf324500392f8ce3798a8c62fdc71ea1912448b654a1ef9987da5fcaeade2",
    "n01770081_harvestman.JPEG": "885d737724ece76c05a0235750736db28583876681a08dbf2b9998a637812c4f",
    "n01795545_black_grouse.JPEG": "ce67393727d54c70be8bc27e71c8efadc8abc45b1378a8113709eef26fa25a87",
    "n01820546_lorikeet.JPEG": "fdea5f2486c9b622cc2ec8401418aa70254d0ba2ccbc16132157d79bb909d995",
    "n01860187_black_swan.JPEG": "8ca32c93d079f636e130e8f73bb090b0a96145e0b46dad6b5b6e96906a6f68b1",
    "n01924916_flatworm.JPEG": "2ff2bdbf4dcaaa2da772730e48af8aac36c4f3b476b9dac7237dcfc35b69ccee",
    "n01980166_fiddler_crab.JPEG": "536b133f753589c1dd4b8b1626cdcd5e28b0a98e203817103293a48721a3e35b",
    "n02007558_flamingo.JPEG": "92bbbb3c138f043152579300808be9d8926458f5284d3720cd9e799e629442ee",
    "n02027492_red-backed_sandpiper.JPEG": "f72fa8150c444eda7eae83b87197a274216a858aa442ac81bc47b6a107104875",
    "n02077923_sea_lion.JPEG": "20a6d861b5a55f8401b95635f7f7f680aeec5b8fed9d074dc452596c08449cf4",
    "n02088094_Afghan_hound.JPEG": "8ba8ac41116ccb9655ef2faa8d992c78b5463f394a415f60be9bd9f6bddaf9d7",
    "n02090721_Irish_wolfhound.JPEG": "8cb0e00b4047c661620912a574f8920cb440248e8e0fe56a1f45274c8563fbdb",
    "n02093428_American_Staffordshire_terrier.JPEG": "1f979f7d0126e0b71d17af5bacaac2985a353a7ea8729efcb2be35b63b28fe41",
    "n02095889_Sealyham_terrier.JPEG": "51f7776df94565bb34e2c02e0c8521d577bc26f84d143d039b1dca9ca6dcfadb",
    "n02097474_Tibetan_terrier.JPEG": "3ba6ddf33c4cd9400f8ffa2a40a58bb0f39cc0decc4b0ee50b6c5fe5f021b57e",
    "n02100236_German_short-haired_pointer.JPEG": "a47dbf366be69cf212d2a445e73b0098de979b1ccdc3632de4d1495b43d07def",
    "n02102480_Sussex_spaniel.JPEG": "fa41e4e50f096729d46e9f354b2639a929bcef131881c9425217328606c96e69",
    "n02105855_Shetland_sheepdog.JPEG": "4497883c341143f34be95b81a4dfda6da0bdeb77b414f13c4580960a22760752",
    "n02107908_Appenzeller.JPEG": "f420b51299101f08c6b931b1e0b14cdd13df3fce9dd886e736e4004af8849517",
    "n02110185_Siberian_husky.JPEG": "776cfad42b60eff9516a3b0a7aac0b8c4470ceb5dc9dc972543f1393c0bae20b",
    "n02112137_chow.JPEG": "9b4d4025b528d2cf72d388fec26c5d25210e5556b978d5970c84c1502ec3e06b",
    "n02114548_white_wolf.JPEG": "dab3abf2d30e020531c26a08556a3ed77b82c9a543e1dd7e65fa07d589dcaf70",
    "n02120505_grey_fox.JPEG": "f17a4cc2db548492c0ca7719a41f547734b64d82e76f52cd9fee96169ad03f73",
    "n02128925_jaguar.JPEG": "6662d41a8518afe2f1e1958b8b49d488f342c97a0536de027511e4e7be529094",
    "n02165105_tiger_beetle.JPEG": "fae69ae44e4c4a4fbb207816acda900e73498248863df87fb095b27ca257e63a",
    "n02219486_ant.JPEG": "294695a2af5745874896cfef791e23af43fe7bb00596f6e2a9226ed1111db34f",
    "n02268853_damselfly.JPEG": "f6555476b510b9f4407ed0f55bd633f42ae193288374048a88be46f2a1451ead",
    "n02325366_wood_rabbit.JPEG": "eebfc7396e1e73ec1a0920b78e43dbfac978e8684b429b6cbbc18b383ee3938a",
    "n02391049_zebra.JPEG": "ca35cfbead9763232ee94ccb8a9d3a2e2e0bff576a1e22221b210589f6c7bd42",
    "n02417914_ibex.JPEG": "ad6690c058a74e8b130e11e1a75adc888d3b2c204418993c811afa67b48dfa61",
    "n02444819_otter.JPEG": "99a200242f2d0d429ad505a43f1a1fe1d6c79496af6dcd801b4b7465ca5713ba",
    "n02484975_guenon.JPEG": "24722d0c329a603518a368e0629457f5d2a8f0397d6d5016b43e828ba1efae5c",
    "n02493509_titi.JPEG": "530ccae6cf280ac25ed1eb4336cfb7caaddbff3827c94b1fad96e87732ec7c65",
    "n02526121_eel.JPEG": "568d3a5f1e2482867cf893ce31dacb859f416bbe06fed5a297e687f8ea018b31",
    "n02669723_academic_gown.JPEG": "58de6404a2dee90d7dd6c7f7ef46513c72b411c1f355df33a5011deb8a63b57e",
    "n02727426_apiary.JPEG": "afe07b904bb809547ead3075b0f0284222803d19f1ab62ab1e0e87c3b5f2cd7f",
    "n02787622_banjo.JPEG": "505eb494271d93a3d785d28f528384b862eeebafdfc2cd149a41aba3c84c3de6",
    "n02802426_basketball.JPEG": "272d807243b760574ab1a477bb3a812c44e3dbe90da9602fd13566ad62bf5e1a",
    "n02823428_beer_bottle.JPEG": "4d1290062390c7084e754c60e6ebfc6d07605482971d264840dcc9598ffb76a0",
    "n02860847_bobsled.JPEG": "286e0dd054e869213f6867fec650e2dc9dbe40251c58a6e3150cae4a6fdaf320",
    "n02894605_breakwater.JPEG": "76651976d12bd3d0f70fa7c75bca49bdc0414a33b4c65ab148e635015fa37d21",
    "n02948072_candle.JPEG": "791cc257765c7e4c0f4b30c627885aa5d4d0b9cb5b1ba34252330b650bb38c50",
    "n02977058_cash_machine.JPEG": "c10dad60ce5f6efc8a04424b39a89eb4da58e23a9baa7e7f200f4a46b1d101a3",
    "n03000247_chain_mail.JPEG": "90d0099ac7f865c1ed8d7aa911fdb341748c6f275285f2462038d577869ad04e",
    "n03042490_cliff_dwelling.JPEG": "bb553e0db1e4cd6f9259da433f2ae0c2e30e79419cee61204af545ad519c07ad",
    "n03095699_container_ship.JPEG": "db16b841d6db9ba224e28430ce8a69912c7de69f016be920a0bf45bef1ee5ad2",
    "n03131574_crib.JPEG": "daf6902ab40b2ce2bd7a21ccc19d4bb2a4be4430248cf87877bde2156821b574",
    "n03196217_digital_clock.JPEG": "c25a567d2ca590e893232cb143c54da3f838421a827771fa322dcaf779ab6e9b",
    "n03240683_drilling_platform.JPEG": "86fd32b07caa0e70d68a27e0117586e45b7ca17ff1ca90fea970fd2f3388b732",
    "n03297495_espresso_maker.JPEG": "83865bb2b54cb057a32a69fbfd528785b5448407550df8881762bdf3e9f360cd",
    "n03379051_football_helmet.JPEG": "37bbffd89a7f643b4c7bb06da80a1a429c6fa87ff3114c6e0826fa42de3370ff",
    "n03424325_gasmask.JPEG": "1ce02134962d604e8f112ca85fadc7f40b568899601432c0ce3bde81a00ec845",
    "n03457902_greenhouse.JPEG": "d5fe517306a2ead2989605d6010771c59175ccb57c8b7a9f6f8de09dd6988f20",
    "n03485407_hand-held_computer.JPEG": "fb0d2cc6b5900a946c49ce63e0705193c25ba9fe4085d8995ba6c7519e1dc73a",
    "n03532672_hook.JPEG": "9cc465fb61ba100c9d7c45195ba5071bc7e2ace4ceb93a71787799e00a113932",
    "n03595614_jersey.JPEG": "ebad1926d479971462465b31714a9ef6d78a734c01485147a772fdda59ecf33d",
    "n03642806_laptop.JPEG": "09eda3a2d823834e59e3db73b9a0a02858d1180f54d620a5a143dceb2b7d691b",
    "n03680355_Loafer.JPEG": "388808e3a42d450f372ccafd9b987c65581a2ccb28feb6f133bf8ecad0cf0df1",
    "n03717622_manhole_cover.JPEG": "0554c0a5cc11dd4863798a5e087aaff50e3461d02ac6886dae8b0f3d7db16366",
    "n03759954_microphone.JPEG": "d4c56c53593594b4789c44144bbd767ebfad18f68a26785f4858c61a05de8510",
    "n03776460_mobile_home.JPEG": "96a181b66035ec2564efd17f5e557d734ab9363753710614354b7af146d7d1a4",
    "n03791053_motor_scooter.JPEG": "28594b15ccc537ce8fd580ca0e75bd4a5dec63f9cdf929b2f5ab6233bdb2b130",
    "n03825788_nipple.JPEG": "0c9df39f781fb93bfc22b97ea7c21790c0011e79fbbd524c703b16df3a678c14",
    "n03868242_oxcart.JPEG": "e3558188621db9444700c81ee6dd55323a50146ee2d6a1a0244faee4a82cdbfd",
    "n03887697_paper_towel.JPEG": "dc7edfb3367a479026537048405b6808228e0082068e27e05532ca32da2b237f",
    "n03908714_pencil_sharpener.JPEG": "37da9d8fb777dfec2c9e5ac2626d2b9839028280e828eef83a68e33ddba6beb4",
    "n03937543_pill_bottle.JPEG": "f60dcd329442460a250bc4e85fa6b6816b405c0f23c26b2025c8a9e555e3c904",
    "n03967562_plow.JPEG": "caac8c0c20b49e0ff76ea1af52c366c2ca7208eef86a04b0fc0c1545488b6e0d",
    "n03995372_power_drill.JPEG": "7d0bcfb96eee74974609aae42a2e3ebd177609dc57af6f8445ff4f8cab0422b5",
    "n04033995_quilt.JPEG": "5b234f0ece004558e8b9a48594312847d6a3c01d57ddd8aa450c8444b2b15462",
    "n04070727_refrigerator.JPEG": "8d6716a12f870ae114c6e4fc0e5162ec349fb1272900612549033f89c3409f74",
    "n04120489_running_shoe.JPEG": "730a1f07d0fadd29563796c9c68d2b55495dc8dba97c66a0d71a519c57cf7f3e",
    "n04147183_schooner.JPEG": "9cc1ce15c3e290d807c264171c8f12cdc1773a04a3c7fa57a1593957c3f34616",
    "n04204238_shopping_basket.JPEG": "c3a7f1bfac7ee9ec7dd83891bf2c4abccd69965de92b3c7b730b14b6b5440fa4",
    "n04243546_slot.JPEG": "02958fd14aa92a76d0536111cde4092debe316d626a704bcdafb19eb81cc0fb0",
    "n04264628_space_bar.JPEG": "04996c6eedd6122d9a2a74cb4caeb29f25312b953c891fdf98ce7b297c58b8d8",
    "n04310018_steam_locomotive.JPEG": "2cab8c311c0f78101ffe9ddd9abfe662a836c84e4aa846c92eb197d4db1cf8b9",
    "n04336792_stretcher.JPEG": "06eb1f1bf1035de9501746040905eed74135fdddf337f5e8544930a1606abcfb",
    "n04367480_swab.JPEG": "ec6a361f1c750ef9a70447dd93dda2a6e3e817e092555266c66af5851ddcb5ef",
    "n04399382_teddy.JPEG": "d32cf76b9bf8f7022fd80644045d6cb0cbe1bf7ba4e538b1b0dc63dd5366000b",
    "n04443257_tobacco_shop.JPEG": "0d452cb22517a87e0cc3dc9c1beab4b13e9ee98c77c07d4a3ec1e2d626f42b1b",
    "n04482393_tricycle.JPEG": "33b50df6ae0c6c35654689384c92014981dd36a11904cd97e4d289b6adb13127",
    "n04509417_unicycle.JPEG": "6f4848a733f5761571d559beb369a405be329918e6ce948d4a3054804c9aded7",
    "n04540053_volleyball.JPEG": "3141e41cacf98c871610fe733289803f9e86bfa658b940e9953ce860a8bb1d50",
    "n04562935_water_tower.JPEG": "fcae5e8802f19218853000c199437ce1bce95f281856370d28652b0945d9bce6",
    "n04597913_wooden_spoon.JPEG": "cd451284891e93b052aa6ffc8813f3ef9de2fc254308a78abee888f964ce4ca0",
    "n06874185_traffic_light.JPEG": "693a3042c68506b15438d531facf201740ab4809ea940798d186a08f017154f0",
    "n07684084_French_loaf.JPEG": "43dc0c73a2d74f17624218fed0fa53fd030fab9a264ebc55e5de7ad3126abd43",
    "n07716906_spaghetti_squash.JPEG": "67f17f1e6577412620ad6808d24b36a783632bfef530f3bfe985bb794905a3c5",
    "n07747607_orange.JPEG": "af01a180e4c2a426288ea7c5864af4375400443f817ebc0ba76bed52f0645c20",
    "n07836838_chocolate_sauce.JPEG": "63caa337a29c8d4f9e7448ce5cdda80139b1e3973376c213514539b065d1eed5",
    "n09193705_alp.JPEG": "1e67aad17cca0b521078571eff516bf71270579150f060bdc99ddaf3fe6d5d59",
    "n09472597_volcano.JPEG": "7fd981c98b35c074979e024aee194e8ba574ba040defa848dde5f330d79dee48",
    "n12768682_buckeye.JPEG": "5f28b23de4f87251222ad02e089cc92d44e1c2b614b669cb3d3029f907e9005d",
}

#: GLUE's own download of SST-2 (the archive holds ``SST-2/dev.tsv``)
SST2_URL = "https://dl.fbaipublicfiles.com/glue/data/SST-2.zip"
SST2_MEMBER = "SST-2/dev.tsv"
#: SHA-256 of GLUE's SST-2 ``dev.tsv`` (872 sentences and a header)
SST2_DEV_SHA256 = "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0"
#: the source line of the canonical sentences (part of every cache key that measured them)
SST2_SOURCE = "GLUE's SST-2 validation file (dev.tsv, 872 sentences), checked against its SHA-256"


def _download(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as r:
            return r.read()
    except Exception as e:  # no network, DNS, HTTP error, timeout
        raise DataUnavailable(f"downloading {url} failed: {type(e).__name__}: {e}") from e


def _write(path: Path, data: bytes) -> None:
    """``data`` to ``path`` atomically; a cache folder that cannot be written is :class:`DataUnavailable`."""
    try:
        atomic_write_bytes(path, data)
    except OSError as e:
        raise DataUnavailable(f"cannot write the download to {path}: {type(e).__name__}: {e}") from e


def _check(path: Path, expected: str, what: str) -> None:
    if not path.is_file():
        raise DataUnavailable(f"{path} does not exist ({what})")
    got = sha256_file(path)
    if got != expected:
        raise DataUnavailable(f"{path}: SHA-256 {got} is not the canonical {what}'s ({expected})")


def check_photo_folder(folder: Path) -> None:
    """Check that ``folder`` holds exactly the canonical photos (:data:`IMAGENET_SAMPLES_SHA256`), each with its
    checksum; non-image files may lie beside them.  ``DataUnavailable`` names the first photo that is
    missing, extra or different."""
    expected = IMAGENET_SAMPLES_SHA256
    folder = Path(folder)
    if not folder.is_dir():
        raise DataUnavailable(f"{folder} is not a folder (the ImageNet sample photos)")
    have = {f.name for f in folder.iterdir()
            if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES and not f.name.startswith(".")}
    extra = sorted(have - set(expected))
    if extra:
        raise DataUnavailable(f"{folder / extra[0]} is not one of the {len(expected)} canonical photos "
                              f"({len(extra)} such files); a folder of other photos is an image source of its "
                              "own (image_source=<folder>)")
    for name in sorted(expected):
        _check(folder / name, expected[name], f"photo {name}")


def photo_folder() -> tuple:
    """``(folder, note)``: the checked folder of the canonical photos and where it is.
    ``$DOBRUSHIN_DATA/imagenet_samples`` when set, else ``<cache>/data/imagenet_samples``, where missing photos
    are downloaded from :data:`IMAGENET_SAMPLES_URL` (each checked, then written atomically).
    ``DataUnavailable`` when a photo cannot be had, differs or cannot be written."""
    expected, url = IMAGENET_SAMPLES_SHA256, IMAGENET_SAMPLES_URL
    d = data_dir()
    if d is not None:
        folder = d / "imagenet_samples"
        if not folder.is_dir():
            raise DataUnavailable(f"DOBRUSHIN_DATA={str(d)!r} has no imagenet_samples/ folder")
        check_photo_folder(folder)
        return folder, "read from $DOBRUSHIN_DATA/imagenet_samples"
    folder = cache_dir() / "data" / "imagenet_samples"
    fetched = 0
    for name in sorted(expected):
        path = folder / name
        if path.is_file() and sha256_file(path) == expected[name]:
            continue
        data = _download(url.format(file=name))
        got = sha256_bytes(data)
        if got != expected[name]:
            raise DataUnavailable(f"{url.format(file=name)}: SHA-256 {got} is not the canonical photo's "
                                  f"({expected[name]})")
        _write(path, data)
        fetched += 1
    check_photo_folder(folder)  # nothing else lies among them: another photo would join the selection
    note = (f"downloaded from github.com/{IMAGENET_SAMPLES_REPO} into {folder}" if fetched else
            f"downloaded earlier from github.com/{IMAGENET_SAMPLES_REPO} into {folder}")
    return folder, note


def sst2_file() -> tuple:
    """``(path, note)``: GLUE's SST-2 ``dev.tsv``, checked: ``$DOBRUSHIN_DATA/sst2/dev.tsv`` when set, else
    ``<cache>/data/sst2/dev.tsv``, taken from GLUE's archive at :data:`SST2_URL` the first time.
    ``DataUnavailable`` when it cannot be had or differs."""
    expected, url = SST2_DEV_SHA256, SST2_URL
    d = data_dir()
    if d is not None:
        f = d / "sst2" / "dev.tsv"
        if not f.is_file():
            raise DataUnavailable(f"DOBRUSHIN_DATA={str(d)!r} has no sst2/dev.tsv")
        _check(f, expected, "SST-2 dev.tsv")
        return f, "read from $DOBRUSHIN_DATA/sst2/dev.tsv"
    f = cache_dir() / "data" / "sst2" / "dev.tsv"
    if f.is_file() and sha256_file(f) == expected:
        return f, f"downloaded earlier from {url} into {f}"
    blob = _download(url)
    try:
        data = zipfile.ZipFile(io.BytesIO(blob)).read(SST2_MEMBER)
    except (zipfile.BadZipFile, KeyError) as e:
        raise DataUnavailable(f"{url}: no {SST2_MEMBER} in the downloaded archive ({type(e).__name__}: {e})") from e
    got = sha256_bytes(data)
    if got != expected:
        raise DataUnavailable(f"{url}: {SST2_MEMBER} has SHA-256 {got}, not the canonical file's ({expected})")
    _write(f, data)
    return f, f"downloaded from {url} into {f}"

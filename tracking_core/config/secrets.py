"""Secret redaction: nothing that looks like a credential reaches a tracker.

slime's ``args`` carries ``wandb_key``; launch scripts put tokens in environment variables that end
up in ``train_env_vars``; database URLs carry passwords; command lines carry ``--wandb-key``. All of
it must be gone before a backend sees the config, while ordinary keys that merely contain the word
"key" or "token" (``input_key``, ``fim_pad_token``, ``router_tls_key_path``) stay readable.

Rules, in order (see :class:`Redactor`):

1. **Allowed keys** (``allow_keys``, ``TRACKING_CORE_ALLOW_KEYS``) are left entirely alone.
2. **By key name.** A name is split into lower-case words (``wandbApiKey`` and ``WANDB_API_KEY``
   both give ``wandb api key``). It is a *credential name* when it holds a strong word (password,
   passwd, passphrase, secret(s), credential(s), creds, or a run-together form such as
   ``dbpassword``/``apikey``) or ``key``/``token`` (or plural) right after a qualifier that names a
   credential (``api``, ``access``, ``auth``, ``private``, ``secret``, ``session``, ``wandb``,
   ``hf``, ``github``, ``openai``, ...), or ends in ``key``/``token`` and mentions a service
   (``MLFLOW_TRACKING_TOKEN``), or is exactly ``token``, or ends in ``pass``/``pwd`` right after
   a word that owns a password (``DB_PASS``, ``MYSQL_PWD``, ``--redis-pass``: a database, a
   protocol, ``user``, ``admin``, or a qualifier above). The term does not count when the
   next word makes the name a reference to the secret (``password_file``, ``api_key_path``,
   ``secret_name``, ``stop_token_ids``) or when the name starts with a counting or switching word
   (``num_api_keys``, ``max_tokens``, ``use_auth_token``). A value under a credential name is
   replaced unless it is None, empty or a bool. A name that only *ends* in ``key``/``token``
   (``input_key``, ``fim_pad_token``, ``key``) is replaced only when the value looks like a
   credential: 20+ characters of ``[A-Za-z0-9_+=-]`` with at least 3 digits and 3 letters, or 32+
   hex digits. User regexes (``secret_keys``, ``TRACKING_CORE_SECRET_KEYS``) mark more names.
3. **By value shape, anywhere** (in every string, in mapping keys, and in the names of records:
   see :meth:`Redactor.redact_name`): ``hf_``, ``sk-``,
   ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_``, GitLab ``glpat-``, Stripe
   ``sk_live_``/``rk_live_`` (and ``_test_``), ``AKIA``/``ASIA``, Slack ``xox?-``, Google
   ``AIza`` tokens, JWTs, PEM and PGP private key blocks, the password of
   ``scheme://user:pass@host`` (up to the URL's last ``@``, so a password holding ``@`` or ``/``
   goes whole), ``Bearer <token>``, the credentials of an ``Authorization:`` header, ``Basic
   <base64 of user:pass>``, and inside command lines, URL query strings or free text
   ``--<name> VALUE`` / ``--<name>=VALUE`` / ``NAME=VALUE`` / ``?name=VALUE`` /
   ``"name": "value"`` where the name passes rule 2. In a list, an item that is a flag
   (``--wandb-key``) or an environment variable's name (``AWS_SECRET_ACCESS_KEY``) passing rule
   2 hides the item after it, as on a command line. User regexes (``patterns``,
   ``TRACKING_CORE_SECRET_PATTERNS``) add shapes; a pattern with a group named ``secret``
   replaces only that group. docs/secrets.md holds these rules as a table, with an example of
   each.

A bare 40-hex value (a W&B key, or a git SHA) is therefore replaced only under a credential name.

A replaced value becomes ``<redacted sha256:XXXXXXXX>``: the first 8 hex digits of the SHA-256 of
the value (its text; other values as compact sorted JSON), so two roles or two runs can be compared
without showing the secret. 32 bits cannot be reversed for a real key, but do confirm a guess of a
weak password; :class:`Redactor` takes ``fingerprint=False`` to write ``<redacted>`` instead.

Redaction paths use the notation of :mod:`tracking_core.config.convert` (``train_env_vars.HF_TOKEN``,
``cmd[3]``), relative to the data passed in.
"""

from __future__ import annotations

import base64
import fnmatch
import functools
import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .. import settings
from .convert import child_path, index_path

__all__ = [
    "Redactor",
    "default_redactor",
    "redact",
    "redact_text",
    "redact_argv",
    "redact_name",
    "RedactedNames",
    "NAMES",
    "fingerprint",
    "classify_name",
    "looks_like_credential",
    "SECRET",
    "MAYBE",
    "PATTERNS_ENV",
    "ALLOW_KEYS_ENV",
    "SECRET_KEYS_ENV",
]

log = logging.getLogger("tracking_core.config")

PATTERNS_ENV = settings.SECRET_PATTERNS
ALLOW_KEYS_ENV = settings.ALLOW_KEYS
SECRET_KEYS_ENV = settings.SECRET_KEYS

#: ``classify_name`` answers: always a secret / a secret only if the value looks like one.
SECRET = "secret"
MAYBE = "maybe"

_MARKER = re.compile(r"<redacted(?: sha256:[0-9a-f]{8})?>")

_STRONG_EXACT = frozenset(
    ("password passwd passphrase secret secrets credential credentials creds").split()
)
_STRONG_SUFFIXES = tuple(
    (
        "password passwd passphrase secret credential credentials apikey apikeys authtoken "
        "accesstoken privatekey secretkey"
    ).split()
)
_NOUNS = ("tokens", "token", "keys", "key")
# ``pass`` / ``pwd`` name a password only after a word that owns one (``DB_PASS``, ``MYSQL_PWD``):
# alone, or after other words, they are ordinary (``pass_k``, ``forward_pass``, ``$PWD``).
_PASS_NOUNS = frozenset(("pass", "pwd"))
_PASS_OWNERS = frozenset(
    (
        "db database mysql mariadb postgres postgresql pg psql sql mssql oracle redis mongo "
        "mongodb cassandra elastic elasticsearch es kafka rabbitmq amqp mq smtp mail email imap "
        "pop ldap ftp sftp proxy user username admin root login sasl keystore truststore store "
        "vault router broker"
    ).split()
)
_QUALIFIERS = frozenset(
    (
        "api access secret private auth authentication signing sign encryption license "
        "licence session bearer refresh oauth master account service admin app deploy webhook "
        "personal id ssh jwt csrf wandb hf huggingface hub openai anthropic github gh gitlab "
        "mlflow comet neptune aws azure gcp google slack discord npm pypi cohere mistral groq "
        "together replicate pinecone"
    ).split()
)
# A name that mentions one of these services and ends in key/token names its credential
# (``MLFLOW_TRACKING_TOKEN``, ``wandb_run_api_key``).
_SERVICES = frozenset(
    (
        "wandb mlflow github gitlab openai anthropic huggingface slack discord comet neptune "
        "pypi npm aws azure gcp cohere mistral groq pinecone replicate"
    ).split()
)
# After the credential term, these make the name a *reference* to a secret, not the secret.
_REFERENCE_AFTER = frozenset(
    (
        "path paths file files filename dir directory name names env var variable id ids type "
        "types len length size count num mode header field column col format fmt policy "
        "prefix suffix source provider backend manager store url uri location arn ref version "
        "enabled enable required rotation ttl expiry expires expiration heads dim index idx "
        "mapping map"
    ).split()
)
# A name that starts with these counts or switches something: never the secret itself.
_NOT_SECRET_FIRST = frozenset(
    (
        "num n max min use enable enabled disable allow require requires has is no skip "
        "validate check count total"
    ).split()
)

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(name)]


def _is_strong(word: str) -> bool:
    return word in _STRONG_EXACT or word.endswith(_STRONG_SUFFIXES)


def _qualified_noun(word: str) -> bool:
    """``wandbkey``, ``hftoken``: a qualifier and a noun run together."""
    return any(word.endswith(noun) and word[: -len(noun)] in _QUALIFIERS for noun in _NOUNS)


@functools.lru_cache(maxsize=16384)
def classify_name(name: str) -> str | None:
    """:data:`SECRET`, :data:`MAYBE` or None for a key or flag name (rule 2 of the module doc)."""
    words = _words(name)
    if not words or (len(words) > 1 and words[0] in _NOT_SECRET_FIRST):
        return None
    if words == ["token"]:
        return SECRET
    kind = None
    last = len(words) - 1
    for i, word in enumerate(words):
        if i < last and words[i + 1] in _REFERENCE_AFTER:
            continue
        if _is_strong(word) or _qualified_noun(word):
            return SECRET
        if word in _PASS_NOUNS and i == last and i > 0:
            if words[i - 1] in _PASS_OWNERS or words[i - 1] in _QUALIFIERS:
                return SECRET
        if word in _NOUNS:
            if i > 0 and words[i - 1] in _QUALIFIERS:
                return SECRET
            if i == last:
                if not _SERVICES.isdisjoint(words[:i]):
                    return SECRET
                kind = MAYBE
    return kind


_CRED_CHARS = re.compile(r"[A-Za-z0-9_+=\-]{20,}")
_HEX32 = re.compile(r"[0-9a-fA-F]{32,}")


def looks_like_credential(value: str) -> bool:
    """Whether a string under a ``*_key``/``*_token`` name looks like a random credential."""
    if len(value) < 20 or len(value) > 1024:
        return False
    if _HEX32.fullmatch(value):
        return True
    if not _CRED_CHARS.fullmatch(value):
        return False
    digits = sum(c.isdigit() for c in value)
    letters = sum(c.isalpha() for c in value)
    return digits >= 3 and letters >= 3


def fingerprint(value: Any) -> str:
    """The redaction marker for ``value``: ``<redacted sha256:XXXXXXXX>``."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)
        except Exception:
            text = repr(value)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"<redacted sha256:{digest}>"


# -- value shapes --------------------------------------------------------------------------------

_PEM = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.S,
)
_TOKENS = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{30,}"
    r"|sk-[A-Za-z0-9_\-]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{30,}"
    r"|gl(?:pat|ptt|dt|rt)-[A-Za-z0-9_\-]{20,}"
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    r"|xox[abprse]-[A-Za-z0-9\-]{10,}"
    r"|AIza[0-9A-Za-z_\-]{35}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"
    r")"
)
# A scheme starts where no scheme character precedes it, so a long "a.b.c..." run is scanned once.
# The password runs to the URL's last "@" (before any query, fragment, quote or blank): a
# password holding "@" or "/" goes whole; an "@" later in the path takes the host with it.
_URL_PASSWORD = re.compile(
    r"((?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:?#\"']*:)"
    r"([^\s?#\"']+)(?=@[^\s@?#\"']*(?:[\s?#\"']|\Z))"
)
_BEARER = re.compile(r"(\b[Bb]earer[ \t]+)([A-Za-z0-9._~+/=\-]{16,})")
# An HTTP Authorization header (or a field named so): after a scheme the credentials go, whatever
# they look like; without one, a token of 16+ characters does (prose such as "Authorization:
# required" stays).
_AUTHORIZATION = re.compile(
    r"(\b(?:[Pp]roxy-)?[Aa]uthorization[\"']?[ \t]*[:=][ \t]*[\"']?)(?:"
    r"((?:Basic|Bearer|Digest|Token|Negotiate|NTLM|AWS4-HMAC-SHA256|basic|bearer|token)[ \t]+)"
    r"(?!<redacted)([^\s\"',;]+)"
    r"|([A-Za-z0-9._~+/=\-]{16,}))"
)
# ``Basic <base64>`` alone counts when the base64 decodes to ``user:password``.
_BASIC = re.compile(r"(\b[Bb]asic[ \t]+)([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")
_FLAG = re.compile(
    r"(?<![\w\-])--(?P<name>[A-Za-z0-9][A-Za-z0-9_.\-]*)(?:=|[ \t]+)"
    r"(?P<value><redacted(?: sha256:[0-9a-f]{8})?>|\"[^\"]*\"|'[^']*'|(?!-)[^\s\"']+)"
)
# ":" then "//" is a URL's scheme, not an assignment: skipping it keeps the value pattern from
# swallowing the URL, so the query's first ``?token=VALUE`` is matched like any later ``&token=``.
_ASSIGN = re.compile(
    r"(?<![\w\-.])([\"']?)(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)\1[ \t]*(?:=|:(?!//))[ \t]*"
    r"(?P<value><redacted(?: sha256:[0-9a-f]{8})?>|\"[^\"]*\"|'[^']*'|[^\s,;&\"'}\]]+)"
)
# Cheap tests first: most config strings hold none of these and skip the regexes.
# (Alternatives grouped by first letter: the engine tries fewer of them at each position.)
_QUICK_TOKENS = re.compile(
    r"hf_|sk[-_]|rk_|g(?:h[pousr]_|ithub_pat_|l(?:pat|ptt|dt|rt)-)|A(?:[KS]IA|Iza)|xox|eyJ"
    r"|-----BEGIN"
)
#: Every name that :func:`classify_name` calls secret or maybe holds one of these, in some case
#: (each word of rule 2 does): a text without them names no secret, so its ``--name value`` and
#: ``name = value`` need no matching (code and math in model outputs are full of ``=`` and ``:``).
SECRET_NAME_PARTS = ("key", "token", "pass", "secret", "cred", "pwd")
#: An environment variable's name (``AWS_SECRET_ACCESS_KEY``): in a list, it names the next item.
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{2,}")


def _split_list(text: str) -> list[str]:
    """Split a comma-separated env value; commas inside ``{}``/``[]``/``()`` or escaped stay."""
    items: list[str] = []
    current = ""
    depth = 0
    # A backslash and the character after it are one piece: ``\,`` is a comma that splits nothing.
    for piece in re.findall(r"\\.|.", text, re.S):
        if piece == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        if piece in ("{", "[", "("):
            depth += 1
        elif piece in ("}", "]", ")") and depth:
            depth -= 1
        current += "," if piece == "\\," else piece
    items.append(current)
    return [item.strip() for item in items if item.strip()]


def _compile(pattern: str | re.Pattern[str], source: str, flags: int = 0) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        # Matching the text literally still catches the secret the user meant to hide; refusing
        # to start the job over a typo in an env var would be worse.
        log.warning(
            "secret pattern %r from %s is not a valid regular expression (%s); "
            "matching it as literal text",
            pattern,
            source,
            exc,
        )
        return re.compile(re.escape(pattern), flags)


class Redactor:
    """Redaction rules: the built-in ones plus the user's patterns and allowed keys.

    ``patterns``: extra value regexes, searched in every string (a group named ``secret`` limits
    the replacement to that group). ``secret_keys``: extra key-name regexes (searched, case
    insensitive) whose values are always replaced. ``allow_keys``: key names or paths
    (``fnmatch`` globs) never touched. With ``use_env`` the environment adds to each list:
    ``TRACKING_CORE_SECRET_PATTERNS``, ``TRACKING_CORE_SECRET_KEYS`` and
    ``TRACKING_CORE_ALLOW_KEYS``, comma-separated (a comma inside ``{}``, ``[]``, ``()`` or after a
    backslash is part of the regex). ``fingerprint=False`` drops the hash from the marker.
    """

    def __init__(
        self,
        patterns: Iterable[str | re.Pattern[str]] = (),
        allow_keys: Iterable[str] = (),
        secret_keys: Iterable[str | re.Pattern[str]] = (),
        *,
        use_env: bool = True,
        fingerprint: bool = True,
    ) -> None:
        def env(name: str) -> list[str]:
            return _split_list(settings.get(name) or "") if use_env else []

        self.patterns = tuple(
            [_compile(p, "patterns") for p in patterns] + [_compile(p, PATTERNS_ENV) for p in env(PATTERNS_ENV)]
        )
        self.secret_keys = tuple(
            [_compile(p, "secret_keys", re.IGNORECASE) for p in secret_keys]
            + [_compile(p, SECRET_KEYS_ENV, re.IGNORECASE) for p in env(SECRET_KEYS_ENV)]
        )
        self.allow_keys = allow = (*map(str, allow_keys), *env(ALLOW_KEYS_ENV))
        self.fingerprint = fingerprint
        # key name -> (the key with secret shapes replaced, name_kind): keys repeat across
        # sections and calls, so both answers are kept (bounded, see _key_info). A plain dict:
        # a redactor stays picklable.
        self._keys: dict[str, tuple[str, str | None]] = {}
        self._allow_exact = frozenset(k for k in allow if not any(c in k for c in "*?["))
        self._allow_globs = tuple(k for k in allow if k not in self._allow_exact)
        #: Record names as redacted (``names[key]``): see :meth:`redact_name`.
        self.names = RedactedNames(self.redact_text)

    # -- rules ---------------------------------------------------------------------------------

    def mask(self, value: Any) -> str:
        """The marker that replaces ``value``."""
        return fingerprint(value) if self.fingerprint else "<redacted>"

    def is_allowed(self, name: str, path: str | None = None) -> bool:
        """Whether the user allowed this key (by name or by path)."""
        if not self.allow_keys:
            return False
        return any(
            key in self._allow_exact or any(fnmatch.fnmatchcase(key, glob) for glob in self._allow_globs)
            for key in (name, path) if key is not None
        )

    def _key_info(self, key: str) -> tuple[str, str | None]:
        info = self._keys.get(key)
        if info is None:
            if len(self._keys) > 65536:
                self._keys.clear()
            info = self._keys[key] = (self.redact_text(key), self.name_kind(key))
        return info

    def name_kind(self, name: str) -> str | None:
        """:data:`SECRET`, :data:`MAYBE` or None for a key or flag name (allow list not applied)."""
        for pattern in self.secret_keys:
            if pattern.search(name):
                return SECRET
        return classify_name(name)

    def _hides(self, kind: str | None, value: Any) -> bool:
        """Whether a value under a name of ``kind`` is replaced."""
        if kind is None or value is None or isinstance(value, bool):
            return False
        if isinstance(value, str):
            if not value or _MARKER.fullmatch(value):
                return False
            return kind == SECRET or looks_like_credential(value)
        if isinstance(value, (list, dict, tuple)) and not value:
            return False
        return kind == SECRET

    def redact_name(self, name: Any) -> str:
        """A record's name (run, tag, metric, table, column, text, artifact) with every secret
        shape replaced (rule 3), as a ``str``. Cached: the same metric name comes millions of
        times. ``self.names[name]`` is the same answer at the cost of a dict lookup."""
        return self.names[name]

    # -- text ----------------------------------------------------------------------------------

    def redact_text(self, text: str) -> str:
        """``text`` with every secret shape replaced (rule 3); the rest is kept as it was."""
        if not text:
            return text
        if _QUICK_TOKENS.search(text):
            text = _PEM.sub(self._masked, text)
            text = _TOKENS.sub(self._masked, text)
        if "@" in text and "://" in text:  # user:password@ needs both
            text = _URL_PASSWORD.sub(lambda m: self._masked(m, 2), text)
        if "earer" in text:
            text = _BEARER.sub(lambda m: self._masked(m, 2), text)
        if len(text) > 13:  # the shortest "Basic <8 chars>" or "Authorization:x"
            if "uthorization" in text:
                text = _AUTHORIZATION.sub(self._authorization_match, text)
            if "asic" in text:
                text = _BASIC.sub(self._basic_match, text)
        flag, assign = "--" in text, "=" in text or ":" in text
        if (flag or assign) and (self.secret_keys or self._may_name_secret(text)):
            if flag:
                text = _FLAG.sub(self._named_value_match, text)
            if assign:
                text = _ASSIGN.sub(self._named_value_match, text)
        for pattern in self.patterns:
            text = pattern.sub(self._user_match, text)
        return text

    def _masked(self, m: re.Match[str], group: int | str = 0) -> str:
        """The text of match ``m`` with its group ``group`` replaced by the marker."""
        text, start = m.group(0), m.start()
        return text[: m.start(group) - start] + self.mask(m.group(group)) + text[m.end(group) - start :]

    def _authorization_match(self, m: re.Match[str]) -> str:
        return self._masked(m, 3 if m.group(3) is not None else 4)

    def _basic_match(self, m: re.Match[str]) -> str:
        try:
            decoded = base64.b64decode(m.group(2), validate=True)
        except ValueError:  # binascii.Error: not base64 (an ordinary word after "Basic")
            return m.group(0)
        return self._masked(m, 2) if b":" in decoded else m.group(0)

    @staticmethod
    def _may_name_secret(text: str) -> bool:
        """Whether ``text`` holds one of :data:`SECRET_NAME_PARTS` (written out: twice as fast
        as a loop over them, and this runs for most strings of a config)."""
        low = text.lower()
        return (
            "key" in low or "token" in low or "pass" in low or "secret" in low or "cred" in low
            or "pwd" in low
        )

    def _named_value_match(self, m: re.Match[str]) -> str:
        """``--name VALUE`` or ``name = VALUE`` (:data:`_FLAG`, :data:`_ASSIGN`) with the value
        (inside its quotes, which stay) replaced where the name hides it."""
        name, raw = m.group("name"), m.group("value")
        quote = raw[0] if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'" else ""
        inner = raw[1:-1] if quote else raw
        if self.is_allowed(name) or not self._hides(self.name_kind(name), inner):
            return m.group(0)
        return m.group(0)[: m.start("value") - m.start()] + quote + self.mask(inner) + quote

    def _user_match(self, m: re.Match[str]) -> str:
        if "secret" in m.re.groupindex and m.group("secret") is not None:
            return self._masked(m, "secret")
        if _MARKER.fullmatch(m.group(0)) or not m.group(0):
            return m.group(0)
        return self.mask(m.group(0))

    def redact_argv(self, argv: Sequence[str]) -> list[str]:
        """A command line with secret flag values and secret-shaped items replaced.

        Handles ``--name VALUE`` and ``--name=VALUE`` for credential names (``--wandb-key``,
        ``--hf-token``), and any item that is itself a secret or a command string.
        """
        out: list[str] = []
        items = [item if isinstance(item, str) else str(item) for item in argv]
        i = 0
        while i < len(items):
            item = items[i]
            if item.startswith("-") and len(item) > 1:
                name, eq, raw = item.partition("=")
                flag = name.lstrip("-")
                if not self.is_allowed(flag):
                    kind = self.name_kind(flag)
                    if eq:
                        if self._hides(kind, raw):
                            out.append(f"{name}={self.mask(raw)}")
                            i += 1
                            continue
                    elif kind is not None and i + 1 < len(items):
                        nxt = items[i + 1]
                        if not nxt.startswith("--") and self._hides(kind, nxt):
                            out.extend([item, self.mask(nxt)])
                            i += 2
                            continue
            out.append(self.redact_text(item))
            i += 1
        return out

    # -- structures ----------------------------------------------------------------------------

    def redact(self, data: Any) -> tuple[Any, list[str]]:
        """A redacted copy of plain data and the sorted paths of the values that changed.

        Apply after :func:`~tracking_core.config.convert.to_plain` (non-plain values are left as
        they are). Input is not modified.
        """
        paths: list[str] = []
        out = self._walk(data, "", paths)
        return out, sorted(set(paths))

    def _walk(self, value: Any, path: str, paths: list[str]) -> Any:
        kind = type(value)
        if kind is str:
            new = self.redact_text(value)
            if new != value:
                paths.append(path)
            return new
        if value is None or kind is int or kind is float or kind is bool:
            return value
        if kind is dict or isinstance(value, Mapping):
            return self._walk_mapping(value, path, paths)
        if kind is list or isinstance(value, (list, tuple)):
            out = [self._walk(item, index_path(path, i), paths) for i, item in enumerate(value)]
            for i in self._named_items(value):
                if not _MARKER.fullmatch(str(out[i])):
                    out[i] = self.mask(value[i])
                    paths.append(index_path(path, i))
            return out
        if isinstance(value, str):
            return self._walk(str(value), path, paths)
        return value

    def _named_items(self, items: Sequence[Any]) -> list[int]:
        """The indices of items that the item before names as a secret: ``["--wandb-key", KEY]``
        (a command line kept as a list) or ``["AWS_SECRET_ACCESS_KEY", VALUE]`` (an environment
        kept as pairs). Lower-case words are left: a list of column names holds ``token``."""
        hidden: list[int] = []
        for i, (item, nxt) in enumerate(zip(items, items[1:], strict=False)):
            if type(item) is not str or not item:
                continue
            if item[0] == "-":
                name = item.lstrip("-")
                if not name or "=" in name:
                    continue
            elif item[0].isupper() and _ENV_NAME.fullmatch(item):
                name = item
            else:
                continue
            if isinstance(nxt, str) and nxt.startswith("--"):
                continue
            if not self.is_allowed(name) and self._hides(self.name_kind(name), nxt):
                hidden.append(i + 1)
        return hidden

    def _walk_mapping(
        self, value: Mapping[Any, Any], path: str, paths: list[str]
    ) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key, val in value.items():
            name = key if type(key) is str else str(key)
            if self.allow_keys and self.is_allowed(name, child_path(path, name)):
                out[key] = _copy(val)
                continue
            new_key, kind = self._key_info(name)
            if new_key != name:
                paths.append(child_path(path, new_key))
            else:
                new_key = key
            # Paths are built only when needed: this loop runs once per key of every config.
            if kind is not None and val is not None and self._hides(kind, val):
                out[new_key] = self.mask(val)
                paths.append(child_path(path, str(new_key)))
                continue
            tv = type(val)
            if val is None or tv is int or tv is bool or tv is float:
                out[new_key] = val
            elif tv is str:
                text = self.redact_text(val)
                if text != val:
                    paths.append(child_path(path, str(new_key)))
                out[new_key] = text
            else:
                out[new_key] = self._walk(val, child_path(path, str(new_key)), paths)
        return out


class RedactedNames(dict[Any, str]):
    """Name -> the name as ``str`` with its secret shapes replaced, filled on first use.

    ``names[key]`` costs one dict lookup once a name has been seen (the pump looks up every key
    of every record). At most :data:`MAX_NAMES` names are kept; past that the cache starts
    over. Only ``str`` names are kept: ``1`` and ``True`` are one dict key but two names."""

    MAX_NAMES = 65536

    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self._redact = redact

    def __missing__(self, key: Any) -> str:
        if type(key) is not str:
            return self._redact(str(key))
        if len(self) >= self.MAX_NAMES:
            self.clear()
        value = self[key] = self._redact(key)
        return value


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy(v) for v in value]
    return value


_default: tuple[tuple[str, ...], Redactor] | None = None


def default_redactor() -> Redactor:
    """A :class:`Redactor` with the built-in rules and the environment's additions (cached)."""
    global _default
    env = tuple(settings.get(name) or "" for name in (PATTERNS_ENV, ALLOW_KEYS_ENV, SECRET_KEYS_ENV))
    cached = _default
    if cached is not None and cached[0] == env:
        return cached[1]
    redactor = Redactor()
    _default = (env, redactor)
    return redactor


def redact(data: Any, redactor: Redactor | None = None) -> tuple[Any, list[str]]:
    """Redact plain data with ``redactor`` (default: built-in rules + env); see :meth:`Redactor.redact`."""
    return (redactor or default_redactor()).redact(data)


def redact_text(text: str, redactor: Redactor | None = None) -> str:
    """Redact a command line or free text; see :meth:`Redactor.redact_text`."""
    return (redactor or default_redactor()).redact_text(text)


def redact_argv(argv: Sequence[str], redactor: Redactor | None = None) -> list[str]:
    """Redact an argument vector (``sys.argv``); see :meth:`Redactor.redact_argv`."""
    return (redactor or default_redactor()).redact_argv(argv)


#: Record names redacted by the built-in rules and the environment's additions in force when each
#: name is first seen: ``NAMES[key]``, one dict lookup for a name seen before (the pump's path).
NAMES = RedactedNames(lambda name: default_redactor().redact_text(name))


def redact_name(name: Any, redactor: Redactor | None = None) -> str:
    """Redact a record's name (run, tag, metric, column, artifact) with ``redactor`` (default:
    :data:`NAMES`); see :meth:`Redactor.redact_name`."""
    return (redactor.names if redactor is not None else NAMES)[name]

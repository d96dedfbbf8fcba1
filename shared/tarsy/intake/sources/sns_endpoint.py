"""Where SNS's own URLs are fetched: AWS, or an SNS emulator for local runs.

An SNS message names the URLs tarsy must visit (its ``SigningCertURL``, a
confirmation's ``SubscribeURL``), and they always name an AWS host — moto's
messages too. A local stack verifying moto's messages must fetch them from
moto instead. :class:`EndpointTransport` does that at the last moment: every
check (https, the allowed host pattern, ``.pem``) still runs on the URL the
message names, and only the connection goes to the configured base URL
(``TARSY_SNS_ENDPOINT_URL``). The ``Host`` header stays the message's SNS
host, which is how an emulator such as moto tells the service and region.

In the cloud the setting is unset and the URLs are fetched as they are.
"""

from __future__ import annotations

import httpx

# Headers of the emulator's answer that describe bytes this transport has already decoded.
_DECODED_AWAY = ("content-encoding", "content-length", "transfer-encoding")


class EndpointTransport(httpx.AsyncBaseTransport):
    """Send every request to ``base_url``'s scheme, host and port; path and query kept."""

    def __init__(self, base_url: str) -> None:
        """Configure the destination.

        Args:
            base_url: For example ``http://127.0.0.1:5000`` (a path is ignored).

        Raises:
            ValueError: ``base_url`` is not an http(s) URL with a host.
        """
        url = httpx.URL(base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"SNS endpoint {base_url!r} is not an http(s) URL with a host")
        self.base_url = url

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Forward the request to the endpoint and return its answer, fully read.

        Args:
            request: The request for the SNS URL.

        Returns:
            The endpoint's response.
        """
        request.url = request.url.copy_with(
            scheme=self.base_url.scheme, host=self.base_url.host, port=self.base_url.port
        )
        # A fresh inner transport per request: the callers close their client (and so
        # this transport) after each request.
        async with httpx.AsyncHTTPTransport() as inner:
            response = await inner.handle_async_request(request)
            try:
                body = await response.aread()
            finally:
                await response.aclose()
        headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _DECODED_AWAY]
        return httpx.Response(response.status_code, headers=headers, content=body)


def endpoint_transport(base_url: str | None) -> EndpointTransport | None:
    """Return the transport for ``TARSY_SNS_ENDPOINT_URL``, or None to fetch from AWS.

    Args:
        base_url: The setting's value.

    Returns:
        A transport when the setting is non-empty.
    """
    return EndpointTransport(base_url) if base_url else None

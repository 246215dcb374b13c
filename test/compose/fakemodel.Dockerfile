# The compose test's fake Messages API (test/compose/fakemodel), built from
# a static binary the test puts in the build context. Test-only.
ARG BASE=debian:12.15-slim
FROM ${BASE}
COPY fakemodel /usr/local/bin/fakemodel
USER 10004:10004
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/fakemodel", "--listen", ":8080"]

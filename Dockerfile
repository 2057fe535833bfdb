# The Libratio Fleet environment as a container, e.g. for a Hugging Face Docker Space.
#   docker build -t libratio-fleet . && docker run -p 7860:7860 libratio-fleet
#   curl localhost:7860/health; the Gradio UI is at http://localhost:7860/web
# The lean set only (constraints/env.txt: kernel, rewards, prompts, baselines, the OpenEnv server; no
# torch). At the root, where Hugging Face Spaces and `openenv push` look for it; openenv.yaml names the port.
# Built and run without Docker by scripts/check_space_image.sh (buildah, a local Debian bookworm base).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

# Spaces run the image as uid 1000; so does everything below but the install.
RUN useradd --create-home --uid 1000 fleet

# The locked dependencies first, in their own layer: a code change does not reinstall them.
COPY constraints/env.txt /tmp/env.txt
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install -q -r /tmp/env.txt \
 && rm /tmp/env.txt

COPY pyproject.toml README.md /tmp/src/
COPY fleet_rl /tmp/src/fleet_rl
COPY rewards /tmp/src/rewards
RUN /opt/venv/bin/pip install -q --no-deps /tmp/src && rm -rf /tmp/src

USER fleet
WORKDIR /home/fleet
EXPOSE 7860
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:7860/health', timeout=4)"]
CMD ["python3", "-m", "fleet_rl.server", "--host", "0.0.0.0", "--port", "7860"]

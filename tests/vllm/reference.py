"""An independent reference for what vLLM answers with pikv's chunks:
transformers' own implementation of the same safetensors weights, in
float32, run once over the whole prompt with an explicit 4-D mask.

The mask is pikv's isolated mode: a chunk's tokens attend causally within
their chunk only; `open_from` on (the question, the generated tokens, and
whatever vLLM recomputed after a failed load) attends to every token
before it. Positions are the actual ones, 0..n-1."""

import torch


def isolated_mask(lengths, open_from, total):
    """Additive (1, 1, total, total) float mask: 0 where attention is allowed."""
    segment = torch.empty(total, dtype=torch.int64)
    at = 0
    for i, n in enumerate(lengths):
        segment[at:at + n] = i
        at += n
    segment[at:] = -1
    i = torch.arange(total)
    causal = i[None, :] <= i[:, None]
    same = segment[None, :] == segment[:, None]
    opened = (i >= open_from)[:, None]
    allowed = causal & (same | opened)
    mask = torch.zeros(total, total)
    mask[~allowed] = torch.finfo(torch.float32).min
    return mask[None, None]


class Reference:
    def __init__(self, model_dir):
        from transformers import AutoModelForCausalLM
        self.model = AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=torch.float32, attn_implementation="eager").eval()

    @torch.no_grad()
    def logprobs(self, tokens, chunk_lengths, open_from):
        """log-softmax of the next token after each position, (n, vocab):
        chunks of `chunk_lengths` isolated, everything from `open_from` on
        attending to all before it (open_from=0: the ordinary causal prompt)."""
        n = len(tokens)
        mask = isolated_mask(chunk_lengths, open_from, n)
        out = self.model(input_ids=torch.tensor([tokens]), attention_mask=mask,
                         position_ids=torch.arange(n)[None])
        return torch.log_softmax(out.logits[0].float(), dim=-1)

    def greedy(self, prompt, chunk_lengths, open_from, steps):
        """Greedy continuation under the same mask, and each step's logprobs."""
        tokens = list(prompt)
        for _ in range(steps):
            lp = self.logprobs(tokens, chunk_lengths, open_from)
            tokens.append(int(lp[-1].argmax()))
        return tokens[len(prompt):], self.logprobs(tokens, chunk_lengths, open_from)


def worst_difference(answer, ref_logprobs, prompt_len):
    """Largest |vLLM - reference| over every logprob vLLM reported: each
    generated step's top-k (and sampled token), and the prompt logprobs of
    the tokens it computed. Also how many values were compared. (vLLM
    0.32 returns uninitialised values as the prompt logprobs of positions
    a connector provided: those are skipped.)"""
    first = answer["num_cached_tokens"] + 1
    worst, compared = 0.0, 0
    for step, got in enumerate(answer["logprobs"]):
        for token, lp in got.items():
            worst = max(worst, abs(lp - float(ref_logprobs[prompt_len - 1 + step, int(token)])))
            compared += 1
    for pos, got in enumerate(answer["prompt_logprobs"]):
        if got is None or pos < first:
            continue
        for token, lp in got.items():
            worst = max(worst, abs(lp - float(ref_logprobs[pos - 1, int(token)])))
            compared += 1
    return worst, compared

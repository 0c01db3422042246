import { describe, expect, it } from "vitest";
import { chatDelta, countdown, errorMessage, parseDuration, playgroundLine, ttlLeft } from "./playground";

describe("countdown", () => {
  it("shows seconds, then minutes, then hours, with fixed-width parts", () => {
    expect(countdown(0)).toBe("0s");
    expect(countdown(45)).toBe("45s");
    expect(countdown(245)).toBe("4m 05s");
    expect(countdown(3725)).toBe("1h 02m 05s");
    expect(countdown(-3)).toBe("0s");
  });
});

describe("ttlLeft", () => {
  it("counts down from the server's answer with the browser's clock only", () => {
    expect(ttlLeft(60, 1_000, 1_000)).toBe(60);
    expect(ttlLeft(60, 1_000, 11_999)).toBe(50);
    expect(ttlLeft(60, 1_000, 120_000)).toBe(0);
  });
});

describe("parseDuration", () => {
  it("takes the CLI's forms and bare minutes", () => {
    expect(parseDuration("2h")).toBe(7200);
    expect(parseDuration("90m")).toBe(5400);
    expect(parseDuration("1h30m")).toBe(5400);
    expect(parseDuration(" 45S ")).toBe(45);
    expect(parseDuration("30")).toBe(1800);
    expect(parseDuration("1d")).toBe(86400);
  });
  it("refuses what is not a duration", () => {
    expect(parseDuration("")).toBeNull();
    expect(parseDuration("2 hours")).toBeNull();
    expect(parseDuration("h")).toBeNull();
    expect(parseDuration("-5m")).toBeNull();
  });
});

describe("playgroundLine", () => {
  it("is the state, the reason and the message", () => {
    expect(playgroundLine({ state: "Ready", reason: "", message: "" })).toBe("Ready");
    expect(playgroundLine({ state: "Pending", reason: "ImagePullFailed", message: "image x: not found" })).toBe(
      "Pending · ImagePullFailed — image x: not found",
    );
  });
});

describe("chatDelta", () => {
  it("reads the text a chunk adds", () => {
    expect(chatDelta('{"choices":[{"index":0,"delta":{"content":"You"}}]}')).toBe("You");
    expect(chatDelta('{"choices":[{"index":0,"delta":{"role":"assistant"}}]}')).toBe("");
    expect(chatDelta('{"choices":[{"index":0,"delta":{"content":null},"finish_reason":"stop"}]}')).toBe("");
    expect(chatDelta('{"choices":[{"index":0,"text":" said"}]}')).toBe(" said");
    expect(chatDelta('{"choices":[]}')).toBe("");
    expect(chatDelta("not json")).toBe("");
  });
  it("ends at [DONE]", () => {
    expect(chatDelta("[DONE]")).toBeNull();
  });
});

describe("errorMessage", () => {
  it("reads StarForge's errors and vLLM's", () => {
    expect(errorMessage(409, '{"error":"Conflict","message":"playground p-1 is Pending, not Ready"}')).toBe(
      "playground p-1 is Pending, not Ready",
    );
    expect(errorMessage(404, '{"error":{"message":"The model `x` does not exist.","type":"NotFoundError"}}')).toBe(
      "The model `x` does not exist.",
    );
    expect(errorMessage(502, "")).toBe("HTTP 502");
    expect(errorMessage(500, "oops")).toBe("oops");
  });
});

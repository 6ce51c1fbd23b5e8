# frozen_string_literal: true

module Densewire
  VERSION = "0.1.0"
  # The wire spec version this gem implements (SPEC.md section 14).
  SPEC_VERSION = "1.4"
end

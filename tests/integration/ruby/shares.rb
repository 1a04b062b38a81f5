# A Ruby program whose time is in four places (a method under a method, a
# class's method, a block, a block in a module's singleton method) and a
# sleep, each timed by the program itself
# (its CPU time; the sleep by the clock); it writes the times (ns) to the
# file named by its first argument when done. Each call runs for some
# 5-10 ms, many sampling periods.
require 'json'

class Shape
  def area(n)
    s = 0.0
    i = 0
    while i < n
      s += i * 0.5
      i += 1
    end
    s
  end
end

module Geometry
  def self.twice(n)
    s = 0
    [n / 2, n - n / 2].each do |m|
      i = 0
      while i < m
        s += i & 7
        i += 1
      end
    end
    s
  end
end

def alpha(n)
  s = 0
  i = 0
  while i < n
    s += i
    i += 1
  end
  s
end

def beta(n)
  alpha(n) + alpha(n)
end

square = lambda do |n|
  s = 0
  i = 0
  while i < n
    s ^= i * i
    i += 1
  end
  s
end

out = ARGV[0]
seconds = (ARGV[1] || 4).to_f
go = ARGV[2] || ''
# (In a method of its own: these sleeps are not the timed ones under <main>. Under <main>
# they once made the profile's Kernel#sleep 5.6% longer than the program's.)
def wait_for_go(go)
  sleep 0.01 while go != '' && !File.exist?(go)
end
wait_for_go(go)
def cpu_ns
  Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID, :nanosecond)
end
t = { 'beta' => 0, 'Shape#area' => 0, 'block' => 0, 'Geometry.twice' => 0, 'sleep' => 0 }
shape = Shape.new
n = (ARGV[3] || 120000).to_i
finish = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < finish
  a = cpu_ns
  beta(n)
  b = cpu_ns
  shape.area(n)
  c = cpu_ns
  square.call(n)
  d = cpu_ns
  Geometry.twice(n)
  g = cpu_ns
  e = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
  sleep 0.02
  f = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
  t['beta'] += b - a
  t['Shape#area'] += c - b
  t['block'] += d - c
  t['Geometry.twice'] += g - d
  t['sleep'] += f - e
end
File.write(out + '.tmp', JSON.generate(t))
File.rename(out + '.tmp', out)

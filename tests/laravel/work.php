<?php
// Runs Laravel's own queue worker (Illuminate\Queue\Worker, as `php artisan queue:work` does)
// on QUEUE until it has been empty (ready, delayed and reserved) for half a second, or for at
// most SECONDS:
//
//   php tests/laravel/work.php PORT PREFIX QUEUE SECONDS RETRY_AFTER
//
// It runs `Recorder@handle` jobs (bootstrap.php), with 3 tries, as `--tries 3` would. With ONCE
// as a sixth argument it runs one job (`--once`); with ABANDON it instead reserves one job and
// exits without finishing it, as a worker that dies would.
require __DIR__ . '/bootstrap.php';

use Illuminate\Contracts\Debug\ExceptionHandler;
use Illuminate\Events\Dispatcher;
use Illuminate\Queue\Worker;
use Illuminate\Queue\WorkerOptions;

$port = (int) $argv[1];
[$prefix, $queueName, $seconds, $retryAfter] = [$argv[2], $argv[3], (float) $argv[4], (int) $argv[5]];
[$container, $capsule] = laravel_queue($port, $prefix, $retryAfter);
$GLOBALS['redis'] = $container['redis']->connection()->client();
$queue = $capsule->getConnection();

$once = ($argv[6] ?? '') === 'ONCE';
if (($argv[6] ?? '') === 'ABANDON') {
    $job = null;
    while ($job === null) {
        $job = $queue->pop($queueName);
    }
    echo $job->uuid(), "\n";
    exit(0);
}

$exceptions = new class implements ExceptionHandler {
    public function report(Throwable $e) { fwrite(STDERR, get_class($e) . ': ' . $e->getMessage() . "\n"); }
    public function shouldReport(Throwable $e) { return true; }
    public function render($request, Throwable $e) { throw $e; }
    public function renderForConsole($output, Throwable $e) { throw $e; }
};
$events = new Dispatcher($container);
$ran = false;
$events->listen(
    [Illuminate\Queue\Events\JobProcessed::class, Illuminate\Queue\Events\JobExceptionOccurred::class],
    function () use (&$ran) {
        $ran = true;
    }
);
$worker = new Worker($capsule->getQueueManager(), $events, $exceptions, fn () => false);
$options = new WorkerOptions('default', 0, 128, 60, 0.05, 3);
$deadline = microtime(true) + $seconds;
$emptySince = null;
while (microtime(true) < $deadline) {
    $worker->runNextJob('default', $queueName, $options);
    // Laravel counts due times in whole seconds: a job due now may take up to a second.
    if ($once) {
        if ($ran) {
            break;
        }
        continue;
    }
    if ($queue->size($queueName) > 0) {
        $emptySince = null;
    } elseif ($emptySince === null) {
        $emptySince = microtime(true);
    } elseif (microtime(true) - $emptySince > 0.5) {
        break;
    }
}
